package sweep

import "time"

// DefaultMinAge is how old an unreferenced object must be before it is
// deleted: far longer than any upload takes to commit its reference.
const DefaultMinAge = 24 * time.Hour

// Report says what one sweep did.
type Report struct {
	Listed  int
	Deleted int
	// Kept counts Cairn's objects that were referenced or too young.
	Kept int
	// Foreign counts objects whose keys are not exactly Cairn's
	// (blobkey.Recognised, or what an interrupted write of such a key
	// left), never deleted.
	Foreign int
	Pages   int
}
