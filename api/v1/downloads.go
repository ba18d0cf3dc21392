package v1

import (
	"context"
	"io"
	"mime"
	"net/http"
	"net/url"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humafiber"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/run"
)

const formMediaType = "application/x-www-form-urlencoded"

// registerDownload registers a restricted download. huma would read and
// decode a body it has a schema for, so the operation is registered with
// an opaque body (the handler reads the form itself, bounded) and the
// form's schema is documented afterwards.
func registerDownload(a *API, op huma.Operation, handler func(context.Context, *IDPath) (*huma.StreamResponse, error)) {
	op.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
		formMediaType: {Schema: &huma.Schema{Type: "string", Format: "binary"}},
	}}
	register(a, op, operationOptions{restrictedDownload: true}, handler)
	op.RequestBody.Content[formMediaType].Schema = &huma.Schema{Type: "object", Required: []string{"reason"},
		Properties: map[string]*huma.Schema{"reason": {Type: "string", MinLength: ptr(1), MaxLength: ptr(2000),
			Description: "Why the raw bytes are needed: trimmed, 1–500 characters; audited."}}}
}

func ptr[T any](v T) *T { return &v }

func downloadResponses(mediaType string) map[string]*huma.Response {
	return map[string]*huma.Response{"200": {Description: "The raw bytes, streamed; never a storage URL.",
		Content: map[string]*huma.MediaType{mediaType: {Schema: &huma.Schema{Type: "string", Format: "binary"}}}}}
}

const downloadRules = "A form body (application/x-www-form-urlencoded, at most 4 KiB) with reason (trimmed, 1–500 characters); " +
	"any query string is refused; no Idempotency-Key. Needs artifact:read_sensitive and a password re-entry within 15 minutes " +
	"(403 REAUTHENTICATION_REQUIRED otherwise). The audit event artifact.sensitive_downloaded is committed before the first byte."

func (a *API) registerDownloads() {
	tags := []string{"Restricted downloads"}
	for _, d := range []struct{ path, kind, summary, extra, mediaType string }{
		{"plan", run.DownloadPlanFile, "Download a run's saved plan file", " Also needs run:read.", "application/octet-stream"},
		{"plan-json", run.DownloadPlanJSON, "Download a run's JSON plan, sensitive values in clear", " Also needs run:read.", "application/json"},
		{"emergency-state", run.DownloadEmergencyState, "Download the state an interrupted apply left",
			" Also needs run:read and state:recover; run:recover alone is not enough.", "application/json"},
	} {
		registerDownload(a, huma.Operation{
			OperationID: "download-run-" + d.path, Method: http.MethodPost, Path: "/v1/runs/{id}/downloads/" + d.path,
			Summary: d.summary, Tags: tags, Description: downloadRules + d.extra, Responses: downloadResponses(d.mediaType),
		}, func(ctx context.Context, in *IDPath) (*huma.StreamResponse, error) {
			return a.restrictedDownload(ctx, d.mediaType, func(p access.Principal, reason string) (run.Download, error) {
				return a.deps.Services.Runs.OpenRunDownload(ctx, p, in.ID, d.kind, reason)
			})
		})
	}
	registerDownload(a, huma.Operation{
		OperationID: "download-state-version", Method: http.MethodPost, Path: "/v1/state-versions/{id}/download",
		Summary: "Download a state version's raw state, sensitive values in clear", Tags: tags,
		Description: downloadRules + " Also needs state:read.", Responses: downloadResponses("application/json"),
	}, func(ctx context.Context, in *IDPath) (*huma.StreamResponse, error) {
		return a.restrictedDownload(ctx, "application/json", func(p access.Principal, reason string) (run.Download, error) {
			return a.deps.Services.Runs.OpenStateDownload(ctx, p, in.ID, reason)
		})
	})
}

// restrictedDownload refuses a query string and a malformed form before
// anything else, then opens the download (which commits its audit record)
// and streams it from storage: fasthttp copies the sealed object's
// decrypting reader to the connection in fixed buffers and closes it.
func (a *API) restrictedDownload(ctx context.Context, mediaType string, open func(p access.Principal, reason string) (run.Download, error)) (*huma.StreamResponse, error) {
	if routeFrom(ctx).rawQuery != "" {
		return nil, httpx.NewErrorBody(httpx.Problem{Status: http.StatusBadRequest, Code: "QUERY_STRING_REFUSED"})
	}
	reason, err := downloadReason(ctx)
	if err != nil {
		return nil, err
	}
	p, err := access.PrincipalFrom(ctx)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	d, err := open(p, reason)
	if err != nil {
		return nil, a.fail(ctx, err)
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		fc := humafiber.UnwrapV2(hctx)
		fc.Set("Content-Type", mediaType)
		fc.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": d.Name}))
		fc.Set("Cache-Control", "private, no-store")
		fc.Set("X-Content-Type-Options", "nosniff")
		fc.Set("X-Cairn-Content-SHA256", run.HexDigest(d.SHA256))
		fc.Status(http.StatusOK)
		fc.Context().SetBodyStream(d.Body, int(d.Size))
	}}, nil
}

// downloadReason reads the form (limitBody already bounded it to 4 KiB)
// and returns its one reason field; other fields (the dashboard's CSRF
// token) are ignored.
func downloadReason(ctx context.Context) (string, error) {
	invalid := func() error {
		return httpx.NewErrorBody(httpx.Problem{Status: http.StatusBadRequest, Code: httpx.CodeValidationFailed})
	}
	if mediaType, _, err := mime.ParseMediaType(routeFrom(ctx).contentType); err != nil || mediaType != formMediaType {
		return "", httpx.NewErrorBody(httpx.Problem{Status: http.StatusUnsupportedMediaType, Code: httpx.CodeUnsupportedMediaType})
	}
	body, _ := ctx.Value(bodyStreamKey{}).(io.Reader)
	if body == nil {
		return "", invalid()
	}
	raw, err := io.ReadAll(io.LimitReader(body, run.MaxDownloadFormBytes+1))
	if err != nil || len(raw) > run.MaxDownloadFormBytes {
		return "", httpx.NewErrorBody(httpx.Problem{Status: http.StatusRequestEntityTooLarge, Code: httpx.CodePayloadTooLarge})
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil || len(form["reason"]) != 1 {
		return "", invalid()
	}
	reason, err := run.ReasonOf(form.Get("reason"))
	if err != nil {
		return "", invalid()
	}
	return reason, nil
}
