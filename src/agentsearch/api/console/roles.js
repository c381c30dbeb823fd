// What the caller's role over a collection lets it do, so the console offers only that. The collections listing
// gives each collection's `role` ('owner' of a personal one, else the team role); the API refuses the rest (403)
// whatever the page shows: this only hides. Each action names the route it calls and the role that route needs,
// as src/agentsearch/api/route_rules.py's ROUTE_RULES declares it (tests/unit/api/test_console_files.py holds the two together).

// Each role covers those before it (src/agentsearch/pipeline/security/roles.py RANK).
const RANK = { viewer: 0, editor: 1, admin: 2, owner: 3 };

export const ACTIONS = {
  upload: { method: 'POST', route: '/v1/collections/{collection_id}/files', role: 'editor' },
  deleteDocument: { method: 'DELETE', route: '/v1/collections/{collection_id}/documents/{document_id}', role: 'editor' },
  editAgents: { method: 'PUT', route: '/v1/collections/{collection_id}/agents', role: 'editor' },
  runQuality: { method: 'POST', route: '/v1/collections/{collection_id}/eval-runs', role: 'editor' },
  manageSources: { method: 'POST', route: '/v1/collections/{collection_id}/sources', role: 'editor' },
};

/** Whether the caller's role over `collection` covers `action` (a key of ACTIONS); no role: nothing. */
export function may(collection, action) {
  const held = collection ? RANK[collection.role] : undefined;
  return held !== undefined && held >= RANK[ACTIONS[action].role];
}
