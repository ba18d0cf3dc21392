package tfe

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/api/platform/jsondoc/jsondoctest"
	"github.com/cairnhq/cairn/api/run"
)

// FuzzDecodeDocument feeds one body to the decoder of every /api/v2
// request document and checks, per document: decoding is all or nothing
// and deterministic; what is accepted is one JSON document holding only
// storable text; a run document passes its options only when it asks for
// none Cairn refuses (auto-apply, destroy) and then carries every run
// option over unchanged, with or without its configuration version
// (without one, the run uses the workspace's current version); a state
// version document yields its input only with a type, serial and MD5, and
// inline state exactly as standard base64 decodes it.
func FuzzDecodeDocument(f *testing.F) {
	for _, s := range []string{
		`{"data":{"type":"runs","attributes":{"message":"Triggered via the OpenTofu CLI","plan-only":false,"refresh-only":false},` +
			`"relationships":{"workspace":{"data":{"type":"workspaces","id":"ws_1"}},"configuration-version":{"data":{"type":"configuration-versions","id":"cv_1"}}}}}`,
		`{"data":{"type":"runs","attributes":{"auto-apply":true,"target-addrs":["a.b"]},"relationships":{"configuration-version":{"data":{"id":"cv_1"}}}}}`,
		`{"data":{"type":"runs","attributes":{"is-destroy":true,"variables":[{"key":"k","value":"v"}]}}}`,
		`{"data":{"type":"state-versions","attributes":{"serial":3,"md5":"0123456789abcdef0123456789abcdef","lineage":"9f1c",` +
			`"state":"eyJ2ZXJzaW9uIjo0fQ==","json-state":"e30="},"relationships":{"run":{"data":{"type":"runs","id":"run_1"}}}}}`,
		`{"data":{"type":"state-versions","attributes":{"serial":1e3,"md5":"x","state":"not base64"}}}`,
		`{"data":{"type":"state-versions","attributes":{"serial":-1,"md5":"m","lineage":"a\u0000b"}}}`,
		`{"data":{"type":"workspaces","attributes":{"name":"demo","execution-mode":"remote","terraform-version":"latest","auto-apply":false}}}`,
		`{"data":{"type":"","attributes":{"reason":"Locked by OpenTofu"}}}`,
		`{"data":{"type":"organizations","attributes":{"name":"acme","email":"ops@example.com"}}}`,
		`{"data":{}}}`, `{"data":{"type":"runs"}} {}`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var runDoc runDocument
		if requireDecoded(t, body, &runDoc) {
			requireRunOptions(t, runDoc)
		}
		var stateDoc stateVersionDocument
		if requireDecoded(t, body, &stateDoc) {
			requireStateInput(t, stateDoc)
		}
		requireDecoded(t, body, &workspaceDocument{})
	})
}

// requireDecoded decodes body into v twice and reports whether it was
// accepted.
func requireDecoded[T any](t *testing.T, body []byte, v *T) bool {
	t.Helper()
	err := decodeBody(body, v)
	var again T
	errAgain := decodeBody(body, &again)
	if (err == nil) != (errAgain == nil) || (err == nil && !reflect.DeepEqual(*v, again)) {
		t.Fatalf("%q decoded as %+v (%v), then as %+v (%v)", body, *v, err, again, errAgain)
	}
	if err != nil {
		if !errors.Is(err, errInvalidDocument) {
			t.Fatalf("%q refused with %v", body, err)
		}
		return false
	}
	if !json.Valid(body) {
		t.Fatalf("accepted %q, which is not one JSON document", body)
	}
	if err := jsondoctest.Storable(*v); err != nil {
		t.Fatal(err)
	}
	return true
}

func requireRunOptions(t *testing.T, d runDocument) {
	t.Helper()
	a := d.Data.Attributes
	refused := (a.AutoApply != nil && *a.AutoApply) || (a.IsDestroy != nil && *a.IsDestroy)
	o, err := d.options()
	if refused != (err != nil) {
		t.Fatalf("run document %+v: options %v, want refused %v", d, err, refused)
	}
	if err != nil {
		if !errors.Is(err, errAutoApply) && !errors.Is(err, run.ErrDestroy) {
			t.Fatalf("run document refused with %v, which has no answer of its own", err)
		}
		return
	}
	// What is not refused is carried over exactly: nothing asked for is
	// dropped, nothing is added, and refresh defaults to true.
	wantRefresh := a.Refresh == nil || *a.Refresh
	if !slices.Equal(o.TargetAddrs, a.TargetAddrs) || !slices.Equal(o.ReplaceAddrs, a.ReplaceAddrs) || o.Refresh != wantRefresh ||
		o.RefreshOnly != (a.RefreshOnly != nil && *a.RefreshOnly) || o.SavePlan != (a.SavePlan != nil && *a.SavePlan) ||
		o.AllowEmptyApply != (a.AllowEmptyApply != nil && *a.AllowEmptyApply) || len(o.Variables) != len(a.Variables) {
		t.Fatalf("run document %+v gave options %+v", d, o)
	}
	for i, v := range a.Variables {
		if o.Variables[i].Key != v.Key || o.Variables[i].Value != v.Value {
			t.Fatalf("variable %d %+v became %+v", i, v, o.Variables[i])
		}
	}
}

func requireStateInput(t *testing.T, d stateVersionDocument) {
	t.Helper()
	in, raw, rawJSON, err := d.input()
	a := d.Data.Attributes
	if err != nil {
		if !errors.Is(err, errInvalidDocument) {
			t.Fatalf("state version document refused with %v", err)
		}
		return
	}
	if d.Data.Type != "state-versions" || a.Serial == nil || in.Serial != *a.Serial || a.MD5 == "" ||
		in.MD5 != a.MD5 || in.Lineage != a.Lineage || in.Force != a.Force {
		t.Fatalf("state version document %+v gave input %+v", d, in)
	}
	wantRaw, errRaw := base64.StdEncoding.DecodeString(a.State)
	if a.State == "" {
		wantRaw = nil
	}
	if errRaw != nil || !bytes.Equal(raw, wantRaw) || (raw == nil) != (a.State == "") {
		t.Fatalf("inline state %q gave %q", a.State, raw)
	}
	if rawJSON != nil && (raw == nil || a.JSONState == "") {
		t.Fatalf("JSON state %q taken without state", a.JSONState)
	}
}

// windowOf applies a log window to a whole log the way phaseLog does with
// the range the run service reads.
func windowOf(body string, ended bool, offset, limit string) []byte {
	w := newLogWindow(offset, limit)
	total := int64(len(body))
	from, to := min(w.logFrom, total), total
	if w.logTo >= 0 {
		to = min(w.logTo, total)
	}
	to = max(to, from)
	withSTX, withETX := w.frame(to-from, total, ended)
	var out []byte
	if withSTX {
		out = append(out, stx)
	}
	out = append(out, body[from:to]...)
	if withETX {
		out = append(out, etx)
	}
	return out
}

// FuzzLogWindow checks the remote-backend log framing the CLI polls with
// offset and limit: any query gives a window of the framed log (STX, the
// log, ETX once ended), starting at the clamped offset and no longer than
// a positive limit, without ever failing. Before, an offset past the start
// with a huge limit overflowed into a slice panic (a 500).
func FuzzLogWindow(f *testing.F) {
	f.Add("Terraform v1.10.6\nPlan: 1 to add\n", true, "0", "")
	f.Add("x", false, "1", "9223372036854775807")
	f.Add("", true, "-5", "-1")
	f.Add("log", true, "99", "2")
	f.Fuzz(func(t *testing.T, body string, ended bool, offset, limit string) {
		framed := "\x02" + body
		if ended {
			framed += "\x03"
		}
		got := string(windowOf(body, ended, offset, limit))
		from, _ := strconv.Atoi(offset)
		from = min(max(from, 0), len(framed))
		if !strings.HasPrefix(framed[from:], got) {
			t.Fatalf("window %q is not the framed log %q from %d", got, framed, from)
		}
		n, err := strconv.Atoi(limit)
		if err == nil && n > 0 && len(got) != min(n, len(framed)-from) {
			t.Fatalf("window of %d bytes for limit %d from %d of %d", len(got), n, from, len(framed))
		}
		if (err != nil || n <= 0) && got != framed[from:] {
			t.Fatalf("without a limit the window is %q, not the rest %q", got, framed[from:])
		}
	})
}

// TestStatusFilterTellsSavedPlansApart: filter[status] keeps runs awaiting
// approval as the protocol shows them, a saved plan as planned_and_saved
// and any other as planned.
func TestStatusFilterTellsSavedPlansApart(t *testing.T) {
	t.Parallel()
	awaiting := string(run.StatusAwaitingApproval)
	for _, tc := range []struct {
		protocol []string
		statuses []string
		saved    run.SavedPlanFilter
	}{
		{[]string{"planned"}, []string{awaiting}, run.SavedPlansExcluded},
		{[]string{"planned_and_saved"}, []string{awaiting}, run.SavedPlansOnly},
		{[]string{"planned", "planned_and_saved"}, []string{awaiting, awaiting}, run.SavedPlansAny},
		{[]string{"applied", "planned_and_saved"}, []string{string(run.StatusApplied), awaiting}, run.SavedPlansOnly},
		{[]string{"pending"}, []string{string(run.StatusPending)}, run.SavedPlansAny},
		{[]string{"no-such-status"}, nil, run.SavedPlansAny},
	} {
		statuses, saved := statusFilter(tc.protocol)
		if !slices.Equal(statuses, tc.statuses) || saved != tc.saved {
			t.Errorf("statusFilter(%q) = %q %q, want %q %q", tc.protocol, statuses, saved, tc.statuses, tc.saved)
		}
	}
}
