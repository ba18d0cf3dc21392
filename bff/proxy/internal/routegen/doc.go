// Command routegen writes the control-plane proxy's allowlist, routes_gen.go,
// from the API contract contracts/openapi.json. The dashboard proxy admits
// only method and path pairs the contract declares, and generating the list
// rather than typing it keeps the two from drifting apart: an endpoint added
// to the API reaches the dashboard by rerunning go generate, and one removed
// from the API stops being proxied the same way. A test in this package
// fails when the committed file no longer matches the contract.
package main
