// Package v1 is Cairn's native API: operations registered code-first with
// huma on Fiber, generating the OpenAPI 3.1 contract committed in
// contracts/openapi.json. It owns the /v1 conventions — session
// authentication that fails closed, body limits checked before reading,
// idempotent mutations in one transaction, the cursor-list contract, the
// response envelopes, and the single table mapping errors to statuses.
// Handlers decode, call one service method, and encode.
package v1
