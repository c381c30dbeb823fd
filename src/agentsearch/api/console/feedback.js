// Thumbs up or down on a finished job's answer and on each of its sources (POST /v1/jobs/{id}/feedback:
// docs/answers.md#feedback). A thumbs down on the answer opens a comment box, sent with the rating again; rating
// again replaces the first rating, so the pressed thumb always shows what the server holds.

import { api } from './api.js';
import { h, toast } from './dom.js';

// Marks every font has (an emoji thumb is a blank box where no emoji font is installed).
const THUMBS = [['up', '✓', 'Helpful'], ['down', '✗', 'Not helpful']];

/** The buttons of one rating (the answer's when ``source`` is null, else that document's); ``worded`` writes the
 * label beside the mark. */
function thumbs(jobId, source, what, onRated, worded = false) {
  const buttons = THUMBS.map(([rating, face, label]) => h('button', {
    type: 'button', class: 'button-quiet thumb', 'aria-pressed': 'false', dataset: { rating },
    'aria-label': `${label}: ${what}`, title: `${label}: ${what}`,
  }, worded ? `${face} ${label}` : face));
  const rate = async (rating, comment) => {
    for (const b of buttons) b.disabled = true;
    try {
      await api(`/v1/jobs/${jobId}/feedback`, { method: 'POST',
        json: { rating, ...(comment ? { comment } : {}), ...(source ? { source } : {}) } });
      for (const b of buttons) b.setAttribute('aria-pressed', String(b.dataset.rating === rating));
      if (onRated) onRated(rating);
    } catch (exc) {
      toast(`Could not send the rating: ${exc.message}`, 'error');
    } finally {
      for (const b of buttons) b.disabled = false;
    }
  };
  for (const b of buttons) b.addEventListener('click', () => rate(b.dataset.rating));
  return { buttons, rate };
}

/** "Was this answer helpful?" with its thumbs, and a comment box after a thumbs down. */
export function answerFeedback(jobId) {
  const comment = h('textarea', { name: 'feedback-comment', rows: '2', maxlength: '2000',
    placeholder: 'What was wrong? (optional)' });
  const send = h('button', { type: 'button', class: 'button-quiet' }, 'Send comment');
  const box = h('div', { class: 'feedback-comment', hidden: true }, comment, send);
  const { buttons, rate } = thumbs(jobId, null, 'this answer', (rating) => { box.hidden = rating !== 'down'; }, true);
  send.addEventListener('click', async () => {
    await rate('down', comment.value.trim());
    box.hidden = true;
    toast('Thanks: your comment was sent.');
  });
  return h('div', { class: 'feedback feedback-answer' },
    h('span', { class: 'muted' }, 'Was this answer helpful? '), ...buttons, box);
}

/** A source's own thumbs, inside its line of the sources list. */
export function sourceFeedback(jobId, documentId) {
  return h('span', { class: 'feedback feedback-source', dataset: { document: documentId } },
    ...thumbs(jobId, documentId, `source ${documentId}`).buttons);
}
