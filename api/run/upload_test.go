package run_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/run"
	"github.com/cairnhq/cairn/e2e/devstack"
)

// failingAfter serves r and then fails with err, as a request body does
// when its client disconnects.
type failingAfter struct {
	r   io.Reader
	err error
}

func (f failingAfter) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, f.err
	}
	return n, err
}

// TestCutUploadLeavesTheVersionPending: a client that goes away mid-upload
// has not sent a malformed archive, so the version stays pending and the
// client's retry is accepted; an archive that is malformed errors it.
func TestCutUploadLeavesTheVersionPending(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ws := h.workspace("cut-upload")
	owner := h.ownerPrincipal()
	newVersion := func() run.ConfigurationVersion {
		var cv run.ConfigurationVersion
		if err := h.inTx(func(tx *sqlx.Tx) error {
			var err error
			cv, err = h.runs.CreateConfigurationVersion(h.ctx, tx, owner, ws, run.ConfigurationInput{Source: run.SourceAPI})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return cv
	}
	archive := devstack.TarGz(map[string]string{"main.tf": `resource "terraform_data" "cut" {}`})

	cv := newVersion()
	errGone := errors.New("client went away")
	_, err := h.runs.UploadConfiguration(h.ctx, cv.ID, failingAfter{bytes.NewReader(archive[:len(archive)/2]), errGone})
	if !errors.Is(err, errGone) {
		t.Fatalf("cut upload: %v, want the body's error", err)
	}
	if got, err := h.runs.GetConfigurationVersion(h.ctx, owner, cv.ID); err != nil || got.Status != run.ConfigurationPending || got.ErrorCode != nil {
		t.Fatalf("after a cut upload: %+v %v, want pending with no error code", got, err)
	}
	got, err := h.runs.UploadConfiguration(h.ctx, cv.ID, bytes.NewReader(archive))
	if err != nil || got.Status != run.ConfigurationUploaded {
		t.Fatalf("retry: %+v %v, want uploaded", got, err)
	}

	malformed := newVersion()
	_, err = h.runs.UploadConfiguration(h.ctx, malformed.ID, bytes.NewReader(archive[:len(archive)/2]))
	var archiveErr run.ArchiveError
	if !errors.As(err, &archiveErr) || archiveErr.Code != "archive_malformed" {
		t.Fatalf("archive ending early: %v, want archive_malformed", err)
	}
	if got, _ := h.runs.GetConfigurationVersion(h.ctx, owner, malformed.ID); got.Status != run.ConfigurationErrored {
		t.Fatalf("malformed archive left the version %s, want errored", got.Status)
	}
}
