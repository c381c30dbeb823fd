// One job on screen: its pipeline stage by stage as the event stream tells it, the answer as it is written, the
// sources its [n] citations open, the reasoning steps and the artifacts. The same view replays a finished job:
// the events route sends a finished job's stage log and agent runs again, then `done`. Under an answer an LLM
// wrote, a line says how it was made: how many of the model's sentences the sources support, which were left out
// and why, or why the model's answer was not used (`metadata.answer.sentences`). Each source and the cited passage
// say where in its file the passage stands ('p. 3', 'slide 2', 'Q4, row 7': locations.js).

import { api, ApiError, jobEvents } from './api.js';
import { append, badge, clear, formatMs, h, parseTime, toast, uid } from './dom.js';
import { renderArtifacts } from './artifacts.js';
import { describeLocation } from './locations.js';
import { staleBanner } from './stale.js';
import { answerFeedback, sourceFeedback } from './feedback.js';

const STAGES = [
  ['pre_search', 'Pre-search agents'],
  ['search', 'Search'],
  ['post_search', 'Post-search agents'],
  ['answer', 'Answer'],
  ['response', 'Response agents'],
];
const FINAL = new Set(['ok', 'error', 'timeout', 'circuit_open', 'skipped', 'not_run', 'cancelled']);
const TERMINAL_JOB = new Set(['succeeded', 'failed', 'cancelled']);
// Why an agent was skipped, in words (the code stays visible in brackets).
const REASONS = {
  stage_timeout: 'the stage’s time budget ran out (stage_timeout)',
  routed: 'an earlier agent routed past it (routed)',
};
// The words the answer step writes into a sentence of the model's that its sources only partly support
// (PARTIAL_MARK in src/agentsearch/pipeline/text/__init__.py); shown as a mark of its own, not as part of the sentence.
const PARTIAL_MARK = '(partly supported)';
// The answer cut at its citation markers and partial marks, each kept as a piece of its own.
const ANSWER_PIECES = /(\[\d+\]|\(partly supported\))/;

/** A step of the pipeline: one row, its status and what it did. */
class Step {
  constructor(list, stage, agentId, label, configId = null) {
    this.stage = stage;
    this.agentId = agentId;
    this.configId = configId;
    this.status = 'pending';
    this.startedAt = null;
    this.name = h('span', { class: 'step-name' }, label);
    this.badgeSlot = h('span', { class: 'step-badge' }, badge('pending'));
    this.duration = h('span', { class: 'step-duration' });
    this.detail = h('div', { class: 'step-detail' });
    this.el = h('li', { class: 'step', dataset: { step: agentId ? `${stage}:${agentId}` : stage, status: 'pending' } },
      h('span', { class: 'step-dot', 'aria-hidden': 'true' }), this.name, this.badgeSlot, this.duration, this.detail);
    list.append(this.el);
  }

  get final() { return FINAL.has(this.status); }

  set(status, { durationMs, cacheHit, note } = {}) {
    this.status = status;
    this.el.dataset.status = status;
    if (cacheHit) this.el.dataset.cache = 'hit';
    clear(this.badgeSlot).append(badge(status, cacheHit ? 'cache hit' : null));
    if (durationMs !== undefined && durationMs !== null) this.setDuration(durationMs);
    if (note) this.note(note);
  }

  setDuration(ms) {
    this.durationMs = ms;
    this.duration.textContent = formatMs(ms);
  }

  note(text, kind = 'note') {
    clear(this.detail).append(h('span', { class: `step-${kind}` }, text));
  }
}

export class JobView {
  /** new JobView(jobId, {question}).el; .start() follows the stream; .cancel() asks the API to cancel. */
  constructor(jobId, { question = null, onEnd = null } = {}) {
    this.jobId = jobId;
    this.onEnd = onEnd;
    this.controller = new AbortController();
    this.steps = [];
    this.stageAt = {};
    this.streamText = '';
    this.quickText = '';  // the offline answer shown while a model writes (answer.quick), until the answer replaces it
    this.answered = false;
    this.job = null;
    this.documents = new Map();
    this.status = 'queued';
    this.pending = { search: null, answer: null, response: [] };
    this.settled = false;

    const headingId = uid('job');
    this.statusSlot = h('span', { class: 'job-status' }, badge('queued'));
    this.cancelButton = h('button', { type: 'button', class: 'button-quiet button-danger', onclick: () => this.cancel() }, 'Cancel');
    this.questionEl = h('h3', { class: 'job-question', id: headingId }, question || '');
    this.meta = h('p', { class: 'job-meta muted' });
    this.lists = {};
    const stageBlocks = STAGES.map(([key, label]) => {
      this.lists[key] = h('ol', { class: 'steps', 'aria-label': label });
      return h('li', { class: 'stage', dataset: { stage: key } }, h('h4', { class: 'stage-title' }, label), this.lists[key]);
    });
    this.search = new Step(this.lists.search, 'search', null, 'Vector and keyword search');
    this.answerStep = new Step(this.lists.answer, 'answer', null, 'Answer with citations');
    this.answerEl = h('div', { class: 'answer', 'aria-live': 'polite', 'aria-busy': 'true' },
      h('p', { class: 'muted answer-placeholder' }, 'The answer appears here as it is written.'));
    this.answerNoteEl = h('div', { class: 'answer-made' });
    this.citation = h('div', { class: 'citation-panel', hidden: true, role: 'region', 'aria-label': 'Cited passage', tabindex: '-1' });
    this.sourcesEl = h('div', { class: 'sources' });
    this.reasoningEl = h('div', { class: 'reasoning' });
    this.artifactsEl = h('div', { class: 'artifacts' });
    this.el = h('article', { class: 'job card', 'aria-labelledby': headingId, dataset: { job: jobId } },
      h('header', { class: 'job-header' }, this.questionEl, h('div', { class: 'job-actions' }, this.statusSlot, this.cancelButton)),
      this.meta,
      h('div', { class: 'job-body' },
        h('section', { class: 'pipeline', 'aria-label': 'Pipeline' }, h('ol', { class: 'stages' }, stageBlocks)),
        h('section', { class: 'result', 'aria-label': 'Answer' },
          h('h4', { class: 'section-title' }, 'Answer'), this.answerEl, this.answerNoteEl, this.citation, this.sourcesEl, this.reasoningEl)),
      this.artifactsEl);
  }

  async start() {
    try {
      this.job = await api(`/v1/jobs/${this.jobId}`, { signal: this.controller.signal });
      this.prepare(this.job);
      for await (const { event, data } of jobEvents(this.jobId, this.controller.signal)) this.handle(event, data);
      if (!this.finishing) await this.finish(this.status);
    } catch (exc) {
      if (exc.name === 'AbortError') return;
      this.meta.textContent = `The event stream stopped: ${exc.message}`;
      if (exc instanceof ApiError && exc.status === 404) this.setStatus('not found');
    }
  }

  stop() { this.controller.abort(); }

  async cancel() {
    this.cancelButton.disabled = true;
    try {
      await api(`/v1/jobs/${this.jobId}`, { method: 'DELETE' });
      this.meta.append(' · cancel requested');
    } catch (exc) {
      toast(`Could not cancel: ${exc.message}`, 'error');
      this.cancelButton.disabled = false;
    }
  }

  /** Rows for every agent the job will run, from the job's config snapshot, in the order a stage runs them. */
  prepare(job) {
    if (!this.questionEl.textContent) this.questionEl.textContent = job.query;
    const when = parseTime(job.created_at);
    this.meta.textContent = `Job ${job.job_id}${when ? ` · asked ${when.toLocaleString()}` : ''}${job.cached ? ' · answered from the cache' : ''}`;
    const specs = [...(job.config_snapshot || [])].sort((a, b) => (a.priority - b.priority) || a.agent_id.localeCompare(b.agent_id));
    for (const spec of specs) {
      if (this.lists[spec.stage]) this.steps.push(new Step(this.lists[spec.stage], spec.stage, spec.agent_id, spec.agent_id, spec.config_id));
    }
    for (const [key] of STAGES) {
      if (key !== 'search' && key !== 'answer' && !this.lists[key].children.length) {
        this.lists[key].append(h('li', { class: 'step step-none' }, 'none configured'));
      }
    }
    this.setStatus(job.status);
  }

  setStatus(status) {
    this.status = status;
    clear(this.statusSlot).append(badge(status));
    // The article's data-status turns final only once finish() has settled every row, so whoever reads the view
    // on that mark (a person, a test) never sees a step still pending beside a finished job.
    if (!TERMINAL_JOB.has(status) || this.settled) this.el.dataset.status = status;
    this.cancelButton.hidden = TERMINAL_JOB.has(status) || status === 'not found';
  }

  step(stage, agentId) {
    let found = this.steps.find((s) => s.stage === stage && s.agentId === agentId && !s.final);
    if (!found) found = this.steps.find((s) => s.stage === stage && s.agentId === agentId && s.status === 'running');
    if (!found && this.lists[stage]) {
      // An agent the snapshot did not list (a fallback standing in): a row of its own, where its stage is.
      const none = this.lists[stage].querySelector('.step-none');
      if (none) none.remove();
      found = new Step(this.lists[stage], stage, agentId, agentId);
      this.steps.push(found);
    }
    return found;
  }

  handle(event, data) {
    switch (event) {
      case 'status': this.setStatus(data.status); break;
      case 'stage': this.onStage(data); break;
      case 'agent': this.onAgent(data); break;
      case 'answer.quick': this.quickText = data.text || ''; this.searchDone(null); this.renderStreaming(); break;
      case 'answer.delta': this.onDelta(data); break;
      case 'answer.reset': this.streamText = ''; this.renderStreaming(); this.answerStep.note(`restarted: ${data.reason || ''}`); break;
      case 'answer': this.onAnswer(data); break;
      case 'done': this.finish(data.status, data.error); break;
      default: break;
    }
  }

  onStage({ stage, at }) {
    const time = parseTime(at);
    const [phase, agentId] = stage.split(':');
    if (phase === 'pre_search' || phase === 'post_search') {
      if (phase === 'post_search') this.searchDone(time);
      const row = this.step(phase, agentId);
      if (row && !row.final) { row.set('running'); row.startedAt = time; }
    } else if (phase === 'core_search' || phase === 'search' || phase === 'merge_search') {
      if (!this.search.final && this.search.status !== 'running') { this.search.set('running'); this.search.startedAt = time; }
    } else if (phase === 'answer') {
      this.searchDone(time);
      if (!this.answerStep.final) { this.answerStep.set('running'); this.answerStep.startedAt = time; }
    } else if (phase === 'response') {
      this.searchDone(time);
      for (const row of this.steps) if (row.stage === 'response' && !row.final) row.set('running');
    } else if (phase === 'retry') {
      this.meta.append(h('span', { class: 'step-note' }, ' · a step was retried'));
    }
  }

  /** The search has ended (a later stage began): shown once every pre-search agent is. One poll of the job can
   * bring a later stage's events before an earlier agent's: the page keeps the order the job ran them in. */
  searchDone(time) {
    if (this.search.final || this.pending.search) return;
    this.pending.search = { time };
    this.settle();
  }

  settle() {
    const ended = (stage) => this.steps.every((s) => s.stage !== stage || s.final);
    if (this.pending.search && ended('pre_search')) {
      const start = this.search.startedAt;
      const { time } = this.pending.search;
      this.pending.search = null;
      if (!this.search.final) this.search.set('ok', { durationMs: start && time ? time - start : undefined });
    }
    if (this.pending.answer && this.search.final && ended('post_search')) {
      const data = this.pending.answer;
      this.pending.answer = null;
      this.answerStep.set('ok', { note: data.method ? `method: ${data.method}${data.fallback_reason ? ` (fell back: ${data.fallback_reason})` : ''}` : null });
    }
    if (this.pending.response.length && this.answerStep.final) {
      const runs = this.pending.response;
      this.pending.response = [];
      for (const run of runs) this.applyAgent(run);
    }
  }

  /** Whatever is held back is shown as it is: the job has ended. */
  flush() {
    if (this.pending.search && !this.search.final) this.search.set('ok');
    if (this.pending.answer && !this.answerStep.final) this.answerStep.set('ok');
    const runs = this.pending.response;
    this.pending = { search: null, answer: null, response: [] };
    for (const run of runs) this.applyAgent(run);
  }

  onAgent(run) {
    if (run.stage !== 'pre_search') this.searchDone(null);
    if (run.stage === 'response' && !this.answerStep.final) {
      this.pending.response.push(run);
      return;
    }
    this.applyAgent(run);
    this.settle();
  }

  applyAgent(run) {
    const row = this.step(run.stage, run.agent_id);
    if (!row) return;
    const reason = run.reason || (run.data && run.data.reason) || (run.metadata && run.metadata.reason);
    const errors = (run.errors || []).map((e) => REASONS[e] || e).join('; ');
    row.set(run.status, { durationMs: run.duration_ms, cacheHit: run.cache_hit });
    if (run.status !== 'ok' && (reason || errors)) row.note([reason, errors].filter(Boolean).join(': '), run.status === 'skipped' ? 'note' : 'error');
    if (run.stood_in_for) row.name.textContent = `${run.agent_id} (stood in for ${run.stood_in_for})`;
    if (run.data) this.describe(row, run);
    else if (run.stage === 'pre_search' || run.stage === 'post_search') this.enrichSoon();
  }

  /** What an agent did, from its run's data: the query as a pre-search agent rewrote it, the documents a
   * post-search agent kept. The events carry no data, so the job's record is read for it. */
  describe(row, run) {
    if (run.status !== 'ok' || !run.data) return;
    if (run.stage === 'pre_search' && typeof run.data.query === 'string') {
      row.el.dataset.query = run.data.query;
      append(clear(row.detail), [h('span', { class: 'step-label' }, 'query '), h('q', { class: 'step-query' }, run.data.query),
        run.data.skip_search ? h('span', { class: 'step-note' }, ' · asked to skip search') : null]);
    } else if (run.stage === 'post_search' && run.data.documents_in !== undefined) {
      clear(row.detail).append(h('span', { class: 'step-note' }, `${run.data.documents_in} → ${run.data.documents_out} documents`));
    }
  }

  enrichSoon() {
    if (this.enriching) return;
    this.enriching = setTimeout(async () => {
      this.enriching = null;
      try {
        const job = await api(`/v1/jobs/${this.jobId}`, { signal: this.controller.signal });
        this.reconcile(job, false);
      } catch { /* the final read at the end fills it in */ }
    }, 150);
  }

  /** The job's record matched to the rows: what each agent did, and (at the end) any status the stream missed. */
  reconcile(job, final) {
    const seen = new Map();
    for (const run of job.agents || []) {
      const key = `${run.stage}:${run.agent_id}`;
      const index = seen.get(key) || 0;
      seen.set(key, index + 1);
      const rows = this.steps.filter((s) => s.stage === run.stage && s.agentId === run.agent_id);
      const row = rows[index] || (final ? this.step(run.stage, run.agent_id) : null);
      if (!row) continue;
      if (final && !row.final) row.set(run.status, { durationMs: run.duration_ms, cacheHit: run.cache_hit });
      this.describe(row, run);
    }
  }

  onDelta({ text }) {
    this.searchDone(null);
    if (!this.answerStep.final && this.answerStep.status !== 'running') this.answerStep.set('running');
    this.streamText += text || '';
    this.renderStreaming();
  }

  /** The text so far, in one replacement of the answer's box (never emptied in between, so nothing flickers): the
   * model's checked sentences as they come, and below them, while the model writes, the quick answer marked as
   * such. The final `answer` replaces both. */
  renderStreaming() {
    const marked = (text) => text.split(ANSWER_PIECES).map((piece) => (piece === PARTIAL_MARK ? partialMark(null) : piece));
    const caret = h('span', { class: 'caret', 'aria-hidden': 'true' });
    const parts = [];
    if (this.streamText || !this.quickText) parts.push(h('p', { class: 'answer-text streaming' }, marked(this.streamText), caret));
    if (this.quickText) {
      parts.push(h('div', { class: 'answer-quick', dataset: { quick: 'true' } },
        h('p', { class: 'answer-quick-label muted' }, this.streamText ? 'Quick answer from the sources:' : 'Quick answer from the sources, while the model writes:'),
        h('p', { class: 'answer-text' }, marked(this.quickText), this.streamText ? null : caret)));
    }
    clear(this.answerEl).append(...parts);
  }

  onAnswer(data) {
    this.answered = true;
    this.answerText = data.text || '';
    this.renderAnswer(this.answerText, null);
    this.pending.answer = data;
    this.searchDone(null);
    this.settle();
  }

  async finish(status, error) {
    this.finishing = true;
    this.flush();
    this.setStatus(status);
    this.answerEl.setAttribute('aria-busy', 'false');
    let job = null;
    try {
      job = await api(`/v1/jobs/${this.jobId}`, { signal: this.controller.signal });
    } catch (exc) {
      if (exc.name === 'AbortError') return;
    }
    if (job) {
      this.job = job;
      this.reconcile(job, true);
      const timings = job.timings_ms || {};
      if (this.search.final && timings.core_search !== undefined) this.search.setDuration(timings.core_search);
      if (timings.answer !== undefined && this.answerStep.status === 'ok') this.answerStep.setDuration(timings.answer);
      const response = job.response;
      if (response) {
        if (!this.search.final) this.search.set(response.metadata && response.metadata.search && response.metadata.search.skipped ? 'skipped' : 'ok', { durationMs: timings.core_search });
        if (!this.answerStep.final) this.answerStep.set('ok', { durationMs: timings.answer });
        this.renderAnswer(response.answer || '', response);
        const banner = staleBanner(job);
        if (banner) this.answerEl.before(banner);
        if (status === 'succeeded') this.sourcesEl.before(answerFeedback(this.jobId));
        this.renderReasoning(response.cot_steps || []);
        renderArtifacts(this.artifactsEl, response.agent_artifacts || []);
      }
    }
    // What never ran: the job ended first (cancelled, failed) or left it out.
    const word = status === 'cancelled' ? 'cancelled' : 'not_run';
    for (const row of [this.search, this.answerStep, ...this.steps]) {
      if (!row.final) row.set(status === 'failed' && row.status === 'running' ? 'error' : word);
    }
    this.markSlowest(job);
    this.settled = true;
    this.el.dataset.status = status;
    if (!this.answered && !(job && job.response)) {
      clear(this.answerEl).append(h('p', { class: status === 'failed' ? 'notice notice-error' : 'muted' },
        status === 'cancelled' ? 'The job was cancelled before it answered.' : `No answer: ${error || (job && job.error) || status}.`));
    }
    if (this.onEnd) this.onEnd(this, job);
  }

  /** Where the time went: the job's own duration, and its slowest step marked (what an operator looks for). */
  markSlowest(job) {
    const rows = [this.search, this.answerStep, ...this.steps].filter((row) => row.durationMs > 0);
    const slowest = rows.reduce((a, b) => (b.durationMs > (a ? a.durationMs : 0) ? b : a), null);
    if (slowest && rows.length > 1) {
      slowest.el.classList.add('step-slowest');
      slowest.duration.title = 'the slowest step of this job';
    }
    const started = job && parseTime(job.created_at);
    const ended = job && parseTime(job.finished_at);
    if (started && ended) this.meta.append(` · took ${formatMs(ended - started)}`);
  }

  /** The answer with each [n] a button that opens the passage of source n, and each partial mark set apart. */
  renderAnswer(text, response) {
    const sources = response ? response.sources || [] : (this.job && this.job.response ? this.job.response.sources : null);
    const paragraph = h('p', { class: 'answer-text' });
    const parts = text.split(ANSWER_PIECES);
    parts.forEach((part, index) => {
      // The sentence a marker ends (a marker written after the full stop belongs to the sentence before it).
      const claim = () => parts.slice(0, index).join('').split(/(?<=[.!?])\s+/)
        .filter((piece) => piece.replace(/\[\d+\]/g, '').trim()).pop() || '';
      if (part === PARTIAL_MARK) { paragraph.append(partialMark(response ? partialReason(response, claim()) : null)); return; }
      const match = /^\[(\d+)\]$/.exec(part);
      if (!match) { paragraph.append(part); return; }
      const n = Number(match[1]);
      const sentence = claim();
      const cited = response ? findCitation(response.citations, n, sentence) : null;
      const verdict = cited ? ` (${VERDICTS[cited.status] || cited.status})` : '';
      paragraph.append(h('button', {
        type: 'button', class: 'cite', 'aria-expanded': 'false', dataset: { source: String(n), verdict: cited ? cited.status : null },
        'aria-label': `Source ${n}${verdict}: show the cited passage`,
        onclick: (event) => this.openCitation(n, sentence.replace(/\[\d+\]/g, '').trim(), event.currentTarget),
      }, `[${n}]`));
    });
    clear(this.answerEl).append(paragraph);
    if (response) {
      this.renderAnswerNote(response.metadata && response.metadata.answer);
      this.renderSources(sources || [], response);
    }
  }

  /** How the answer was made, when a model wrote it or was asked to: one line, and the model's sentences that
   * were left out, each with the reason the check gave. */
  renderAnswerNote(info) {
    clear(this.answerNoteEl);
    const line = modelNote(info);
    if (!line) return;
    this.answerNoteEl.dataset.method = info.method;
    this.answerNoteEl.append(h('p', { class: 'answer-note' }, line));
    const leftOut = (Array.isArray(info.sentences) ? info.sentences : []).filter((s) => s && typeof s === 'object' && !s.delivered);
    if (!leftOut.length) return;
    this.answerNoteEl.append(h('details', { class: 'answer-left-out' },
      h('summary', null, `The model's sentences left out (${leftOut.length})`),
      h('ul', null, leftOut.map((s) => h('li', null, h('q', null, String(s.text || '')),
        // A sentence the check had nothing against is left out only when the offline answer replaced the model's.
        h('span', { class: 'muted' }, ` — ${s.reason || 'the offline answer was delivered instead'}`))))));
  }

  renderSources(sources) {
    clear(this.sourcesEl);
    if (!sources.length) return;
    this.sourcesEl.append(h('h4', { class: 'section-title' }, `Sources (${sources.length})`),
      h('ol', { class: 'source-list' }, sources.map((source, i) => h('li', null,
        h('button', { type: 'button', class: 'source-link', onclick: (event) => this.openCitation(i + 1, '', event.currentTarget) },
          source.title || source.document_id),
        located(describeLocation(source.location), 'source-location'),
        h('span', { class: 'muted source-meta' }, ` ${source.document_id} · score ${Number(source.score).toFixed(3)}`),
        this.jobId ? sourceFeedback(this.jobId, source.document_id) : null))));
  }

  async openCitation(n, claim, button) {
    const response = this.job && this.job.response;
    const source = response && (response.sources || [])[n - 1];
    for (const other of this.el.querySelectorAll('.cite[aria-expanded="true"]')) other.setAttribute('aria-expanded', 'false');
    clear(this.citation).hidden = false;
    if (!source) {
      this.citation.append(h('p', { class: 'muted' }, `Source ${n} is not among the job's sources (yet).`));
      return;
    }
    if (button && button.classList.contains('cite')) button.setAttribute('aria-expanded', 'true');
    const close = h('button', { type: 'button', class: 'button-quiet citation-close', 'aria-label': 'Close the cited passage',
      onclick: () => { this.citation.hidden = true; if (button) { button.setAttribute('aria-expanded', 'false'); button.focus(); } } }, 'Close');
    const body = h('div', { class: 'citation-body' }, h('p', { class: 'muted' }, 'Reading the document…'));
    // The answer step's own check of this sentence against this source, when the job has one (docs/citations.md).
    const cited = findCitation(response.citations, n, claim);
    const where = describeLocation((cited && cited.location) || source.location);
    this.citation.append(h('div', { class: 'citation-head' },
      h('span', { class: 'cite-number' }, `[${n}]`),
      h('div', null, h('strong', { class: 'citation-title' }, source.title || source.document_id),
        located(where, 'citation-location'),
        h('div', { class: 'muted' }, `${source.document_id} · score ${Number(source.score).toFixed(3)}`)), close), body);
    this.citation.focus();
    const verdict = cited ? h('p', { class: 'citation-verdict' }, h('span', { class: 'muted' }, 'Checked against the source: '),
      badge(cited.status), cited.reason ? ` ${cited.reason}` : '') : null;
    try {
      const doc = await this.document(source.document_id);
      const passage = (cited && (spanPassage(doc.text, inPart(cited, doc.parts)) || spanPassage(doc.text, cited)))
        || bestPassage(doc.text, claim);
      clear(body).append(...[verdict].filter(Boolean), h('blockquote', { class: 'passage' },
        passage.before ? h('span', { class: 'passage-context' }, `${passage.before} `) : null,
        h('mark', null, passage.match),
        passage.after ? h('span', { class: 'passage-context' }, ` ${passage.after}`) : null));
    } catch (exc) {
      clear(body).append(h('p', { class: 'field-error' }, `Could not read the document: ${exc.message}`));
    }
  }

  async document(documentId) {
    const collection = this.job.collection_id;
    if (!this.documents.has(documentId)) {
      this.documents.set(documentId, api(`/v1/collections/${collection}/documents/${encodeURIComponent(documentId)}`));
    }
    return this.documents.get(documentId);
  }

  renderReasoning(steps) {
    clear(this.reasoningEl);
    if (!steps.length) return;
    this.reasoningEl.append(h('details', { class: 'reasoning-details', open: true },
      h('summary', null, `Reasoning steps (${steps.length})`),
      h('ol', null, steps.map((step) => h('li', null, step.thought,
        step.evidence && step.evidence.length ? h('span', { class: 'muted' }, ` — ${step.evidence.join(', ')}`) : null)))));
  }
}

const VERDICTS = { supported: 'supported by the source', partial: 'only partly supported', unsupported: 'not supported by the source' };

/** One line on how an LLM's answer was made, from the job's `metadata.answer`; null when no model wrote one (none
 * configured, or no documents to answer from). The PDF report and the email draft print the same line
 * (model_note in src/agentsearch/pipeline/agents/builtin/citation_marks.py). */
export function modelNote(info) {
  if (!info || typeof info !== 'object') return null;
  const sentences = Array.isArray(info.sentences) ? info.sentences.filter((s) => s && typeof s === 'object') : null;
  if (info.method !== 'llm') {
    if (!sentences && !info.degraded) return null;
    const reason = String(info.fallback_reason || 'the offline answer was delivered instead').replace(/[. ]+$/, '');
    return `The model's answer was not used: ${reason}.`;
  }
  if (!sentences) return null;
  const model = info.model || (info.draft && info.draft.model);
  const count = (status) => sentences.filter((s) => s.status === status).length;
  const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
  const leftOut = sentences.filter((s) => !s.delivered).length;
  let line = `Written by the model${model ? ` (${model})` : ''}: ${count('supported')} of ${plural(sentences.length, 'sentence')} supported by the sources`;
  if (count('partial')) line += `, ${count('partial')} only partly`;
  if (leftOut) line += `; ${leftOut} left out`;
  if (Number.isInteger(info.quotes_added) && info.quotes_added > 0) line += `; ${plural(info.quotes_added, 'quote')} from the sources added`;
  return `${line}.`;
}

/** Where in its file a passage stands, beside its source's title ("Q4 report, p. 3"); nothing when it has no place. */
function located(where, className) {
  return where ? h('span', { class: className, dataset: { location: where } }, `, ${where}`) : null;
}

/** A partly supported sentence's mark: the answer's own words, set apart, the check's reason in its title. */
function partialMark(reason) {
  return h('span', { class: 'partial-mark', title: `Only partly supported by the sources${reason ? `: ${reason}` : ''}` }, PARTIAL_MARK);
}

/** Why the sentence a partial mark ends is only partly supported: the check's reason for that sentence. */
function partialReason(response, claim) {
  const norm = (text) => String(text || '').replace(/\[\d+\]/g, '').replace(PARTIAL_MARK, '').replace(/[.!?。\s]+$/, '')
    .replace(/\s+/g, ' ').trim().toLowerCase();
  const wanted = norm(claim);
  if (!wanted) return null;
  const same = (text) => { const own = norm(text); return own && (own.includes(wanted) || wanted.includes(own)); };
  const info = response.metadata && response.metadata.answer;
  const sentence = (info && Array.isArray(info.sentences) ? info.sentences : [])
    .find((s) => s && s.status === 'partial' && s.reason && same(s.text));
  if (sentence) return sentence.reason;
  const cited = (response.citations || []).find((c) => c && c.status === 'partial' && c.reason && same(c.sentence));
  return cited ? cited.reason : null;
}

/** The response's check of the sentence a marker ends, for source n: matched by the sentence's words. */
export function findCitation(citations, n, claim) {
  const norm = (text) => text.replace(/\[\d+\]/g, '').replace(/\s+/g, ' ').trim().toLowerCase();
  const wanted = norm(claim);
  const mine = (citations || []).filter((c) => c && c.source === n);
  return mine.find((c) => { const own = norm(c.sentence || ''); return own && wanted && (own.includes(wanted) || wanted.includes(own)); })
    || (mine.length === 1 ? mine[0] : null);
}

/** The checked span moved to where its part starts in the document's text: a span is into the chunk the job
 * retrieved, which opens the part of the same location when the part is one chunk (a page, a slide); null when no
 * part has the citation's location. */
function inPart(cited, parts) {
  const where = describeLocation(cited.location);
  const part = where && cited.span && (parts || []).find((p) => p && describeLocation(p.location) === where);
  return part ? { ...cited, span: [cited.span[0] + part.start, cited.span[1] + part.start] } : null;
}

/** The checked span, when it points into this text: offsets are into the chunk the job retrieved, which is the
 * document's whole text for a one-chunk document; a span that does not say the sentence's words is not used. */
function spanPassage(text, cited) {
  if (!cited || !cited.span) return null;
  const [start, end] = cited.span;
  const piece = text.slice(start, end);
  const wanted = words(cited.sentence || '');
  const own = words(piece);
  let shared = 0;
  for (const w of own) if (wanted.has(w)) shared += 1;
  if (!piece.trim() || !wanted.size || shared / wanted.size < 0.3) return null;
  const before = text.slice(Math.max(0, start - 200), start).replace(/^\S*\s/, '');
  const after = text.slice(end, end + 200).replace(/\s\S*$/, '');
  return { before: before.trim() ? `…${before.trim()}` : '', match: piece.trim(), after: after.trim() ? `${after.trim()}…` : '' };
}

const WORD = /[\p{L}\p{N}]+/gu;

function words(text) {
  return new Set((text.toLowerCase().match(WORD) || []).filter((w) => w.length > 2));
}

/** The document's sentence that shares most words with the claim the citation ends, with its neighbours. */
export function bestPassage(text, claim) {
  const sentences = text.split(/(?<=[.!?])\s+/).filter((s) => s.trim());
  if (!sentences.length) return { before: '', match: text.slice(0, 400), after: '' };
  const wanted = words(claim);
  let best = 0;
  let bestScore = -1;
  sentences.forEach((sentence, i) => {
    const own = words(sentence);
    let shared = 0;
    for (const w of own) if (wanted.has(w)) shared += 1;
    const score = wanted.size ? shared / Math.sqrt(own.size || 1) : (i === 0 ? 1 : 0);
    if (score > bestScore) { bestScore = score; best = i; }
  });
  return { before: sentences[best - 1] || '', match: sentences[best], after: sentences[best + 1] || '' };
}
