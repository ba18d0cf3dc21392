// Package problem is the single table that turns domain errors into public
// statuses and codes. Every Cairn surface asks it; the native API and the
// identity server render the answer as the bounded error object, the
// remote-backend API as a JSON:API document. Unknown errors become a bare
// 500, reported as an unhandled failure without their text.
package problem
