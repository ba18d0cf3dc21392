package tfe

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/db"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/state"
)

// uploadURLLifetime is how long a signed upload URL works.
const uploadURLLifetime = time.Hour

// inlineStateLimit bounds a state-version document that carries the state
// inline (base64). Larger states use the upload URLs, as the OpenTofu CLI
// does, and are streamed.
const inlineStateLimit = 16 << 20

func (s *server) registerState(r fiber.Router) {
	r.Post("/workspaces/:id/state-versions", s.guard(s.byWorkspaceID, s.createStateVersion))
	r.Get("/workspaces/:id/current-state-version", s.guard(s.byWorkspaceID, s.currentStateVersion))
	r.Get("/workspaces/:id/current-state-version-outputs", s.guard(s.byWorkspaceID, s.currentOutputs))
	r.Get("/state-versions", s.guard(s.byStateVersionFilter, s.listStateVersions))
	r.Get("/state-versions/:id", s.guard(s.byStateVersion, s.readStateVersion))
	r.Get("/state-versions/:id/outputs", s.guard(s.byStateVersion, s.stateVersionOutputs))
	r.Get("/state-versions/:id/download", s.guard(s.byStateVersion, s.downloadState))
	r.Get("/state-version-outputs/:id", s.guard(s.byOutput, s.readOutput))
	r.Put("/state-versions/:id/upload/:kind", s.upload)
}

func (s *server) uploadURL(versionID, kind string) string {
	return s.signedURL(http.MethodPut, "/api/v2/state-versions/"+versionID+"/upload/"+kind, uploadURLLifetime)
}

func (s *server) absolute(path string) string {
	return strings.TrimRight(s.Config.PublicURL, "/") + path
}

func (s *server) stateVersionResource(v state.Version, outputs []state.Output) resource {
	attrs := map[string]any{
		"serial":              v.Serial,
		"status":              v.Status,
		"created-at":          timestamp(v.CreatedAt),
		"resources-processed": v.Finalized(),
		"terraform-version":   v.ToolVersion,
	}
	if v.Finalized() {
		attrs["size"] = *v.Size
		attrs["hosted-state-download-url"] = s.absolute("/api/v2/state-versions/" + v.ID + "/download")
	} else {
		attrs["hosted-state-upload-url"] = s.uploadURL(v.ID, "state")
		attrs["hosted-json-state-upload-url"] = s.uploadURL(v.ID, "json")
	}
	rels := map[string]relationship{"workspace": toOne(v.WorkspaceID, "workspaces")}
	if outputs != nil {
		refs := make([]ref, len(outputs))
		for i, o := range outputs {
			refs[i] = ref{ID: o.ID, Type: "state-version-outputs"}
		}
		rels["outputs"] = relationship{Data: refs}
	}
	return resource{ID: v.ID, Type: "state-versions", Attributes: attrs, Relationships: rels,
		Links: map[string]string{"self": "/api/v2/state-versions/" + v.ID}}
}

// outputResource renders an output. A sensitive output never carries its
// value, and its detailed type is withheld too: the OpenTofu CLI then reads
// the (permission-checked) state itself instead of asking for the value.
func outputResource(o state.Output) resource {
	attrs := map[string]any{
		"name":      o.Name,
		"sensitive": o.Sensitive,
		"type":      state.OutputKind(o.TypeJSON),
		"value":     nil,
	}
	if !o.Sensitive {
		attrs["value"] = json.RawMessage(*o.ValueJSON)
		attrs["detailed-type"] = json.RawMessage(o.TypeJSON)
	} else {
		attrs["detailed-type"] = nil
	}
	return resource{ID: o.ID, Type: "state-version-outputs", Attributes: attrs,
		Links: map[string]string{"self": "/api/v2/state-version-outputs/" + o.ID}}
}

// respondStateVersion answers with a version, including its outputs when
// asked (include=outputs); unknown include values are ignored.
func (s *server) respondStateVersion(c *fiber.Ctx, status int, p access.Principal, v state.Version) error {
	var outputs []state.Output
	if v.Finalized() {
		var err error
		if outputs, err = s.State.Outputs(c.UserContext(), p, v.ID); err != nil {
			return s.writeError(c, err)
		}
	}
	return s.writeStateVersion(c, status, v, outputs)
}

// writeStateVersion renders a version with its outputs, included when the
// request asks for them.
func (s *server) writeStateVersion(c *fiber.Ctx, status int, v state.Version, outputs []state.Output) error {
	doc := map[string]any{"data": s.stateVersionResource(v, outputs)}
	if includes(c, "outputs") && len(outputs) > 0 {
		included := make([]resource, len(outputs))
		for i, o := range outputs {
			included[i] = outputResource(o)
		}
		doc["included"] = included
	}
	return writeDocument(c, status, doc)
}

func includes(c *fiber.Ctx, name string) bool {
	for _, v := range strings.Split(c.Query("include"), ",") {
		if strings.TrimSpace(v) == name {
			return true
		}
	}
	return false
}

type stateVersionDocument struct {
	Data struct {
		Type       string `json:"type"`
		Attributes struct {
			Serial    *int64 `json:"serial"`
			MD5       string `json:"md5"`
			Lineage   string `json:"lineage"`
			Force     bool   `json:"force"`
			State     string `json:"state"`
			JSONState string `json:"json-state"`
		} `json:"attributes"`
		Relationships struct {
			Run struct {
				Data *ref `json:"data"`
			} `json:"run"`
		} `json:"relationships"`
	} `json:"data"`
}

// input is the version a document declares and its inline state and JSON
// state (nil when absent; JSON state only comes with state).
func (d stateVersionDocument) input() (in state.CreateInput, raw, rawJSON []byte, err error) {
	a := d.Data.Attributes
	if d.Data.Type != "state-versions" || a.Serial == nil || a.MD5 == "" {
		return in, nil, nil, errInvalidDocument
	}
	in = state.CreateInput{Serial: *a.Serial, MD5: a.MD5, Lineage: a.Lineage, Force: a.Force}
	if r := d.Data.Relationships.Run.Data; r != nil {
		in.RunID = r.ID
	}
	if a.State == "" {
		return in, nil, nil, nil
	}
	if raw, err = base64.StdEncoding.DecodeString(a.State); err != nil {
		return in, nil, nil, errInvalidDocument
	}
	if a.JSONState != "" {
		if rawJSON, err = base64.StdEncoding.DecodeString(a.JSONState); err != nil {
			return in, nil, nil, errInvalidDocument
		}
	}
	return in, raw, rawJSON, nil
}

// createStateVersion declares a version. Without inline state it answers
// with signed upload URLs (the two-step flow the OpenTofu CLI uses); with
// inline base64 state it stores and finalizes at once.
func (s *server) createStateVersion(c *fiber.Ctx, p access.Principal, o owner) error {
	var doc stateVersionDocument
	if err := decodeDocumentLimit(c, inlineStateLimit, &doc); err != nil {
		return s.writeError(c, err)
	}
	in, raw, rawJSON, err := doc.input()
	if err != nil {
		return s.writeError(c, err)
	}
	ctx := c.UserContext()
	var v state.Version
	err = db.WithTx(ctx, s.DB, func(tx *sqlx.Tx) error {
		var err error
		v, err = s.State.Create(ctx, tx, p, o.WorkspaceID, in)
		return err
	})
	if err != nil {
		return s.writeError(c, err)
	}
	if raw != nil {
		if v, err = s.State.Upload(ctx, v.ID, bytes.NewReader(raw)); err != nil {
			return s.writeError(c, err)
		}
		if rawJSON != nil {
			if err := s.State.UploadJSON(ctx, v.ID, bytes.NewReader(rawJSON)); err != nil {
				return s.writeError(c, err)
			}
		}
	}
	return s.respondStateVersion(c, http.StatusCreated, p, v)
}

// upload receives state bytes at a signed capability URL. The PUT carries
// no credential, so the signature, then admission for the version's exact
// organization and workspace, are checked before a byte is read.
func (s *server) upload(c *fiber.Ctx) error {
	ctx := c.UserContext()
	kind, versionID := c.Params("kind"), c.Params("id")
	path := "/api/v2/state-versions/" + versionID + "/upload/" + kind
	if (kind != "state" && kind != "json") || !s.validSignature(http.MethodPut, path, c.Query("expires"), c.Query("signature")) {
		return s.writeError(c, fault.ErrNotFound)
	}
	v, err := s.State.PendingOwner(ctx, versionID)
	if err != nil {
		return s.writeError(c, err)
	}
	// A managed run publishing the state of its admitted apply finishes
	// that phase even if the workspace was suspended meanwhile; any other
	// upload is a mutation like the rest.
	rule := launch.Admit
	if v.RunID != nil {
		rule = launch.AdmitAccess
	}
	if _, err := s.Launch.RequireBy(ctx, nil, launch.Subject{OrganizationID: v.OrganizationID, WorkspaceID: v.WorkspaceID}, rule); err != nil {
		return s.writeError(c, err)
	}
	if int64(c.Request().Header.ContentLength()) > state.MaxStateBytes {
		return s.writeError(c, state.ErrTooLarge)
	}
	body := c.Request().BodyStream()
	if body == nil {
		body = strings.NewReader("")
	}
	if kind == "json" {
		err = s.State.UploadJSON(ctx, versionID, body)
	} else {
		_, err = s.State.Upload(ctx, versionID, body)
	}
	if err != nil {
		return s.writeError(c, err)
	}
	return c.SendStatus(http.StatusOK)
}

func (s *server) readStateVersion(c *fiber.Ctx, p access.Principal, o owner) error {
	v, err := s.State.Get(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	return s.respondStateVersion(c, http.StatusOK, p, v)
}

// currentStateVersion is read by every sandboxed plan and apply, twice
// in a plan: the version and its outputs are read under one check.
func (s *server) currentStateVersion(c *fiber.Ctx, p access.Principal, o owner) error {
	v, outputs, err := s.State.CurrentWithOutputs(c.UserContext(), p, o.WorkspaceID)
	if err != nil {
		return s.writeError(c, err)
	}
	return s.writeStateVersion(c, http.StatusOK, v, outputs)
}

// downloadState streams the raw state bytes of a finalized version, its
// release audited before the first byte.
func (s *server) downloadState(c *fiber.Ctx, p access.Principal, o owner) error {
	r, v, err := s.State.ReadBody(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	c.Set(fiber.HeaderContentType, "application/json")
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	// fasthttp closes the reader (and so the sealed object) when done.
	c.Context().SetBodyStream(r, int(*v.Size))
	return nil
}

func (s *server) outputsDocument(c *fiber.Ctx, outputs []state.Output) error {
	number, size := pageParams(c)
	total := len(outputs)
	start := min((number-1)*size, total)
	page := outputs[start:min(start+size, total)]
	data := make([]resource, len(page))
	for i, o := range page {
		data[i] = outputResource(o)
	}
	return writeDocument(c, http.StatusOK, map[string]any{"data": data, "meta": paginate(number, size, total)})
}

func (s *server) stateVersionOutputs(c *fiber.Ctx, p access.Principal, o owner) error {
	outputs, err := s.State.Outputs(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	return s.outputsDocument(c, outputs)
}

func (s *server) currentOutputs(c *fiber.Ctx, p access.Principal, o owner) error {
	outputs, err := s.currentStateOutputs(c, p, o.WorkspaceID)
	if err != nil {
		return s.writeError(c, err)
	}
	return s.outputsDocument(c, outputs)
}

// currentStateOutputs lists the outputs of a workspace's current state
// (state:read_outputs is enough); a workspace without state has none (not
// an error).
func (s *server) currentStateOutputs(c *fiber.Ctx, p access.Principal, workspaceID string) ([]state.Output, error) {
	outputs, err := s.State.CurrentOutputs(c.UserContext(), p, workspaceID)
	if errors.Is(err, fault.ErrNotFound) {
		return nil, nil
	}
	return outputs, err
}

func (s *server) readOutput(c *fiber.Ctx, p access.Principal, o owner) error {
	out, err := s.State.Output(c.UserContext(), p, c.Params("id"))
	if err != nil {
		return s.writeError(c, err)
	}
	return writeData(c, http.StatusOK, outputResource(out))
}

func (s *server) listStateVersions(c *fiber.Ctx, p access.Principal, o owner) error {
	number, size := pageParams(c)
	rows, total, err := s.State.HistoryPage(c.UserContext(), p, o.WorkspaceID, number, size)
	if err != nil {
		return s.writeError(c, err)
	}
	data := make([]resource, len(rows))
	for i, v := range rows {
		data[i] = s.stateVersionResource(v, nil)
	}
	return writeDocument(c, http.StatusOK, map[string]any{"data": data, "meta": paginate(number, size, total)})
}

// maxPageNumber bounds page[number] so its row offset cannot overflow; a
// page this far out is empty anyway.
const maxPageNumber = 1_000_000

// pageParams reads page[number] and page[size] (defaults 1 and 20, size at
// most 100, number at most maxPageNumber).
// pageOf is the page of items the request's page parameters ask for, with
// its pagination metadata.
func pageOf[T any](c *fiber.Ctx, items []T) ([]T, map[string]any) {
	number, size := pageParams(c)
	start := min((number-1)*size, len(items))
	return items[start:min(start+size, len(items))], paginate(number, size, len(items))
}

func pageParams(c *fiber.Ctx) (int, int) {
	number, _ := strconv.Atoi(c.Query("page[number]"))
	size, _ := strconv.Atoi(c.Query("page[size]"))
	if number < 1 {
		number = 1
	}
	if size < 1 {
		size = 20
	}
	return min(number, maxPageNumber), min(size, 100)
}
