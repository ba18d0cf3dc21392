package runner

import "testing"

// TestLostConnectionIsReadFromWhatTofuSaid feeds the classifier what tofu
// printed when a connection was cut off under it, and failures that are
// not that: only the first kind may make a plan be retried.
func TestLostConnectionIsReadFromWhatTofuSaid(t *testing.T) {
	t.Parallel()
	for said, want := range map[string]bool{
		`Error: error loading state: Failed to retrieve workspace w: stream error: stream ID 7; INTERNAL_ERROR; received from peer`: true,
		`Error reading discovery document body: unexpected EOF`:                                                                     true,
		`Error: Failed to read organization "o" at host h: Get "https://h/api/v2/organizations/o/entitlement-set": EOF`:             true,
		`read tcp 127.0.0.1:50000->127.0.0.1:443: read: connection reset by peer`:                                                   true,
		`http2: client connection lost`: true,
		`Error: Unsupported argument on main.tf line 3, in resource "terraform_data" "x": An argument named "nope" is not expected here.`: false,
		`Get "https://h/": dial tcp 127.0.0.1:9: connect: connection refused`:                                                             false,
		`Get "https://h/": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`:                                    false,
		`Error in function call: Call to function "jsondecode" failed: unexpected end of JSON input.`:                                     false,
		``: false,
	} {
		if got := lostConnection(said); got != want {
			t.Errorf("lostConnection(%q) = %v, want %v", said, got, want)
		}
	}
}
