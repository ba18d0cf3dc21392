// Package capability signs and checks capability URLs: URLs that carry no
// credential and are authorized by an HMAC over the method, the resource
// (path, plus any query the grant is bound to) and an expiry. State and
// archive uploads, phase logs and policy bundle grants all use the one
// Signer, keyed from AUTH_SECRET, so every process holding that secret
// (cairn-api and cairn-worker) signs and checks the same grants.
package capability
