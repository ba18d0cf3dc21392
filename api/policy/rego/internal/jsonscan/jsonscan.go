// Package jsonscan holds the byte scanning that package rego's input
// checks and the engine's input conversion share, so both read a JSON
// document's strings the same way.
package jsonscan

// StringEnd returns the index of the quote closing the string that opens
// at doc[start]; doc is valid JSON (json.Valid), which is what lets it skip
// every escaped byte without decoding it.
func StringEnd(doc []byte, start int) int {
	for j := start + 1; ; j++ {
		switch doc[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
}
