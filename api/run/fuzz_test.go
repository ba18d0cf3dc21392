package run

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cairnhq/cairn/api/platform/jsondoc"
)

// FuzzLogBuffer writes a phase's output to a log buffer in fuzzed pieces,
// with a long run of filler that makes lines longer than a chunk, and
// checks what would be stored: every byte PostgreSQL text accepts, rows
// within the chunk size that add up to the text, the unfinished line
// bounded, and the secret in none of its spellings (escaped, base64,
// URL-encoded), however short it is and however the writes and cuts fell. The secret is UTF-8 without NUL (variable values are
// validated so) and without U+FFFD, which invalid output becomes and which
// would otherwise let the buffer "print" a secret the output never held.
func FuzzLogBuffer(f *testing.F) {
	secret := "hunter2-canary"
	f.Add([]byte("Plan: 1 to add\n  + input = \""+secret+"\"\n"), secret, uint16(0), []byte{3})
	f.Add([]byte(secret+"tail"), secret, uint16(maxChunkSize-4), []byte{181, 1})
	f.Add([]byte("x"+secret), secret, uint16(maxChunkSize-len(secret)/2), []byte{181})
	f.Add([]byte(`"pw=\"q"`+"\x00\xff\xe2\x82"), `pw="q`, uint16(40000), []byte{7, 200})
	f.Add([]byte("\u00e9\u00e9\u00e9\n"), "\u00e9\u00e9\u00e9\u00e9", uint16(maxChunkSize), []byte{0})
	f.Add([]byte("pin=42 b64=NDI url=a%2Fb\n"), "42", uint16(0), []byte{2})
	f.Add([]byte("x=a/b y=YS9i\n"), "a/b", uint16(0), []byte{1})

	f.Fuzz(func(t *testing.T, output []byte, secret string, pad uint16, writes []byte) {
		if !utf8.ValidString(secret) || strings.ContainsAny(secret, "\x00\uFFFD") {
			return
		}
		half := len(output) / 2
		raw := bytes.Join([][]byte{output[:half], bytes.Repeat([]byte("x"), int(pad)), output[half:]}, nil)
		b := newLogBuffer([]string{secret})
		forms := maskedForms([]string{secret})
		held := maxChunkSize
		for _, f := range forms {
			held += len(f)
		}
		var stored strings.Builder
		for i := 0; len(raw) > 0; i++ {
			size := len(raw)
			if len(writes) > 0 {
				w := int(writes[i%len(writes)])
				size = min(1+w*w, len(raw))
			}
			b.write(raw[:size])
			raw = raw[size:]
			if b.partial.Len() > held {
				t.Fatalf("unfinished line holds %d bytes", b.partial.Len())
			}
			if i%3 == 0 {
				stored.WriteString(b.take(false))
			}
		}
		stored.WriteString(b.take(true))
		text := stored.String()

		if !jsondoc.StorableText(text) {
			t.Fatalf("stored text PostgreSQL refuses: %q", text)
		}
		var joined strings.Builder
		for _, c := range logChunks(text) {
			if len(c) == 0 || len(c) > maxChunkSize || !utf8.ValidString(c) {
				t.Fatalf("chunk of %d bytes, valid %v", len(c), utf8.ValidString(c))
			}
			joined.WriteString(c)
		}
		if joined.String() != text {
			t.Fatal("chunks do not add up to the text")
		}
		if secret == "" {
			return
		}
		// Every spelling is masked, however short the secret: its escaped,
		// base64 and URL-encoded forms too.
		for _, piece := range strings.Split(text, redacted) {
			for _, form := range forms {
				if strings.Contains(piece, form) {
					t.Fatalf("stored log shows %q", form)
				}
			}
		}
	})
}
