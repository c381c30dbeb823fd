// Where a passage stands in its file, in words: the wording of describe_location in src/agentsearch/pipeline/text/locations.py,
// which the PDF report and the email draft print. A location is a source's or a citation's `location`:
// {page: 3} -> 'p. 3', {slide: 2} -> 'slide 2', {sheet: 'Q4', row: 7} -> 'Q4, row 7',
// {sheet: 'Q4', rows: [7, 12]} -> 'Q4, rows 7–12', {section: 'Results > Revenue'} -> 'Results > Revenue',
// null or {} -> ''.

// Between the first and the last row of a range: an en dash, as a printed range is written.
const RANGE_DASH = '\u2013';

/** A page, slide or row number as written; null for what is not one (a boolean, a list, an empty string). */
function number(value) {
  if (value === null || value === undefined || typeof value === 'boolean' || typeof value === 'object') return null;
  const text = String(value).trim();
  return text || null;
}

function rows(value) {
  if (!Array.isArray(value) || value.length !== 2) return null;
  const [first, last] = value.map(number);
  if (first === null || last === null) return null;
  return first === last ? `row ${first}` : `rows ${first}${RANGE_DASH}${last}`;
}

/** describeLocation({page: 3}) === 'p. 3': its page, slide, sheet and row(s), section, in that order, joined by
 * ', '; '' for null, {} or a location of nothing this knows. */
export function describeLocation(location) {
  if (!location || typeof location !== 'object' || Array.isArray(location)) return '';
  const page = number(location.page);
  const slide = number(location.slide);
  const row = number(location.row);
  return [
    page ? `p. ${page}` : null,
    slide ? `slide ${slide}` : null,
    typeof location.sheet === 'string' ? location.sheet.trim() : null,
    row ? `row ${row}` : rows(location.rows),
    typeof location.section === 'string' ? location.section.trim() : null,
  ].filter(Boolean).join(', ');
}
