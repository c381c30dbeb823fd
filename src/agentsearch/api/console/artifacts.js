// A job's artifacts in place: the PDF inline, the chart as an image, the MP3 in a player, the email draft rendered
// in a sandboxed frame (no scripts, no same-origin access, no forms), the summary as text, the deck as a download.
// The bytes come inlined in the job's view; each becomes a blob: URL of this page (downloads need no key in a URL).

import { base64Blob } from './api.js';
import { clear, formatBytes, h } from './dom.js';

const urls = new Set();

function blobUrl(artifact) {
  const url = URL.createObjectURL(base64Blob(artifact.data, artifact.content_type.split(';')[0]));
  urls.add(url);
  return url;
}

function text(artifact) {
  return new TextDecoder().decode(Uint8Array.from(atob(artifact.data), (c) => c.charCodeAt(0)));
}

function download(artifact, url, label) {
  return h('a', { class: 'button-quiet download', href: url, download: artifact.filename }, label || `Download ${artifact.filename}`);
}

const RENDERERS = {
  pdf(artifact, url) {
    const pages = artifact.metadata.pages;
    return [
      h('iframe', { class: 'artifact-pdf', src: url, title: `PDF report ${artifact.filename}`, loading: 'lazy' }),
      h('p', { class: 'muted' }, pages ? `${pages} page${pages === 1 ? '' : 's'} · ` : '', download(artifact, url)),
    ];
  },
  png(artifact, url) { return chart(artifact, url); },
  svg(artifact, url) { return chart(artifact, url); },
  mp3(artifact, url) {
    const seconds = artifact.metadata.duration_s;
    return [
      h('audio', { class: 'artifact-audio', controls: true, preload: 'metadata', src: url, 'aria-label': `Audio summary ${artifact.filename}` }),
      h('p', { class: 'muted' }, seconds ? `${Math.round(seconds)} s · voice ${artifact.metadata.voice || 'default'} · ` : '', download(artifact, url)),
    ];
  },
  html(artifact, url) {
    const subject = artifact.metadata.subject;
    return [
      subject ? h('p', { class: 'email-subject' }, h('span', { class: 'muted' }, 'Subject: '), subject) : null,
      // sandbox="": the draft is shown, never run; srcdoc keeps it off any URL.
      h('iframe', { class: 'artifact-email', sandbox: '', srcdoc: text(artifact), title: `Email draft ${artifact.filename}` }),
      h('p', { class: 'muted' }, download(artifact, url)),
    ];
  },
  txt(artifact, url) {
    return [h('pre', { class: 'artifact-text' }, text(artifact)), h('p', { class: 'muted' }, download(artifact, url))];
  },
  pptx(artifact, url) {
    const slides = artifact.metadata.slides;
    return h('p', { class: 'artifact-deck' }, download(artifact, url, `Download ${artifact.filename}`),
      h('span', { class: 'muted' }, ` ${slides !== undefined ? `${slides} slide${slides === 1 ? '' : 's'} · ` : ''}${formatBytes(artifact.size)}`));
  },
};

function chart(artifact, url) {
  const points = artifact.metadata.points || [];
  const alt = points.length
    ? `Bar chart: ${points.map((p) => `${p.label} ${p.text || p.value}`).join(', ')}`
    : `Chart ${artifact.filename}`;
  return [h('img', { class: 'artifact-chart', src: url, alt }), h('p', { class: 'muted' }, download(artifact, url))];
}

const TITLES = { pdf: 'PDF report', png: 'Chart', svg: 'Chart', mp3: 'Audio summary', html: 'Email draft', txt: 'Summary', pptx: 'Presentation' };

export function renderArtifacts(container, artifacts) {
  clear(container);
  if (!artifacts.length) return;
  const order = ['txt', 'png', 'svg', 'mp3', 'html', 'pptx', 'pdf'];
  const sorted = [...artifacts].sort((a, b) => order.indexOf(a.type) - order.indexOf(b.type));
  container.append(h('h4', { class: 'section-title' }, `Artifacts (${artifacts.length})`),
    h('div', { class: 'artifact-grid' }, sorted.map((artifact) => {
      const url = blobUrl(artifact);
      const render = RENDERERS[artifact.type];
      return h('figure', { class: `artifact artifact-${artifact.type}`, dataset: { type: artifact.type, agent: artifact.agent_id } },
        h('figcaption', null, h('strong', null, TITLES[artifact.type] || artifact.type),
          h('span', { class: 'muted' }, ` ${artifact.agent_id} · ${artifact.filename}`)),
        render ? render(artifact, url) : h('p', null, download(artifact, url), h('span', { class: 'muted' }, ` ${formatBytes(artifact.size)}`)));
    })));
}

window.addEventListener('pagehide', () => { for (const url of urls) URL.revokeObjectURL(url); });
