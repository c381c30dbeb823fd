// A collection's ingestion in words: the `ingestion` of GET /v1/collections/{id} (src/agentsearch/pipeline/ingestion/progress.py).
// {documents_done: 40, documents_total: 100, pending: 60, chunks: 160, documents_per_s: 2, chunks_per_s: 8,
//  eta_s: 30} -> 'Indexing: 40 of 100 documents · 160 chunks · 2.0 documents/s, 8.0 chunks/s · about 30 s left';
// once nothing is pending -> 'Indexed: 100 documents · 400 chunks at 8.0 chunks/s'.

/** A rate as read at a glance: one decimal below 10 a second, whole numbers above. */
function rate(value) {
  return value < 10 ? value.toFixed(1) : String(Math.round(value));
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** timeLeft(30) === 'about 30 s', timeLeft(250) === 'about 5 min', timeLeft(4800) === 'about 1 h 20 min'. */
export function timeLeft(seconds) {
  const whole = Math.max(1, Math.round(seconds));
  if (whole < 60) return `about ${whole} s`;
  const minutes = Math.round(whole / 60);
  if (minutes < 60) return `about ${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return `about ${hours} h${minutes % 60 ? ` ${minutes % 60} min` : ''}`;
}

/** The progress line of an ingestion: documents done of all, chunks, the rate and the time left while anything is
 * pending; what it came to once nothing is. '' when the collection never had one. */
export function ingestionText(ingestion) {
  if (!ingestion || !ingestion.documents_total) return '';
  const failed = ingestion.documents_failed ? ` (${ingestion.documents_failed} failed)` : '';
  const chunks = plural(ingestion.chunks, 'chunk');
  const hasRate = typeof ingestion.documents_per_s === 'number';
  if (!ingestion.pending) {
    const pace = hasRate ? ` at ${rate(ingestion.chunks_per_s)} chunks/s` : '';
    return `Indexed: ${plural(ingestion.documents_done, 'document')}${failed} · ${chunks}${pace}`;
  }
  const parts = [`Indexing: ${ingestion.documents_done} of ${plural(ingestion.documents_total, 'document')}${failed}`,
    chunks];
  if (hasRate) {
    parts.push(`${rate(ingestion.documents_per_s)} documents/s, ${rate(ingestion.chunks_per_s)} chunks/s`);
  }
  const eta = ingestion.eta_s;
  // No time left before anything ended, nor after a minute without an end (a stalled ingestion): which of the two.
  const measuredBy = ingestion.documents_done ? 'more' : 'the first';
  parts.push(typeof eta === 'number' ? `${timeLeft(eta)} left` : `time left: once ${measuredBy} documents are done`);
  return parts.join(' · ');
}
