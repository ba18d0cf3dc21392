package site

import (
	"errors"
	"io"
	"mime"
	"net/http"
)

// maxFormField bounds a small field of a multipart form; the file part
// streams through unbuffered, bounded by the API (100 MB).
const maxFormField = 8 << 10

// errFormRefused is a multipart form that is cross-origin, malformed or
// without the session's CSRF token: nothing of it was forwarded.
var errFormRefused = errors.New("form refused")

// errFormBroken is a form that did not arrive whole.
var errFormBroken = errors.New("form broken")

// streamForm reads a multipart form whose small fields come first and
// whose one file part, named file, streams to upload as it arrives, never
// held whole. The CSRF token precedes the file, so nothing is forwarded
// for a forged post. upload is not called when no file was chosen; its
// error is returned as it is.
func (s *Site) streamForm(r *http.Request, file string, upload func(fields map[string]string, archive io.Reader) error) (map[string]string, error) {
	if !s.sameOrigin(r) {
		return nil, errFormRefused
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" {
		return nil, errFormRefused
	}
	parts, err := r.MultipartReader()
	if err != nil {
		return nil, errFormRefused
	}
	fields := map[string]string{}
	for n := 0; ; n++ {
		if n > 16 {
			return nil, errFormRefused
		}
		part, err := parts.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, errFormBroken
		}
		if part.FormName() != file {
			value, err := io.ReadAll(io.LimitReader(part, maxFormField+1))
			if err != nil || len(value) > maxFormField {
				return nil, errFormRefused
			}
			fields[part.FormName()] = string(value)
			continue
		}
		if !s.sessions.ValidCSRF(r.Context(), fields["csrf_token"]) {
			return nil, errFormRefused
		}
		if part.FileName() == "" {
			continue
		}
		if err := upload(fields, part); err != nil {
			return fields, err
		}
	}
	if !s.sessions.ValidCSRF(r.Context(), fields["csrf_token"]) {
		return nil, errFormRefused
	}
	return fields, nil
}

// answerForm answers a multipart form that streamForm refused, reporting
// whether it did.
func answerForm(w http.ResponseWriter, err error) bool {
	if !errors.Is(err, errFormRefused) {
		return false
	}
	http.Error(w, "This form could not be accepted: reload the page and try again.", http.StatusForbidden)
	return true
}
