package v1

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jmoiron/sqlx"

	"github.com/cairnhq/cairn/api/access"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/registry"
)

// RegistrySourceRequest binds a module to a repository of the
// organization's code-host installation (PUT
// /v1/registry/modules/{id}/source), or unbinds it.
type RegistrySourceRequest struct {
	RepositoryID *int64 `json:"repository_id" nullable:"true" minimum:"1" doc:"A repository selected in the organization's connected installation; null unbinds the module."`
	Directory    string `json:"directory,omitempty" maxLength:"1024" doc:"The module's repository-relative directory; empty for the root."`
	TagPrefix    string `json:"tag_prefix,omitempty" maxLength:"100" doc:"Tags named this prefix followed by v?MAJOR.MINOR.PATCH[-pre][+build] publish versions (e.g. network/ in a monorepo)."`
}

func (r *RegistrySourceRequest) input() *registry.SourceInput {
	if r == nil {
		return nil
	}
	return &registry.SourceInput{RepositoryID: r.RepositoryID, Directory: r.Directory, TagPrefix: r.TagPrefix}
}

type putRegistrySourceInput struct {
	IdempotencyHeader
	IDPath
	Body RegistrySourceRequest
}

// RegistrySkippedTagView is a matching tag a sync did not publish.
type RegistrySkippedTagView struct {
	Tag    string `json:"tag"`
	Reason string `json:"reason" enum:"already_ingested,version_exists" doc:"already_ingested: a push or an earlier sync took the tag; version_exists: the module has the version from elsewhere."`
}

// RegistrySyncView is what POST /v1/registry/modules/{id}/actions/sync did.
type RegistrySyncView struct {
	Published []string                 `json:"published" doc:"The versions this sync started publishing, in semver order; each appears in the version list and ends ok or errored."`
	Skipped   []RegistrySkippedTagView `json:"skipped" doc:"Tags matching the binding that were left alone, and why."`
}

func registrySyncView(r registry.SyncResult) RegistrySyncView {
	v := RegistrySyncView{Published: r.Published, Skipped: make([]RegistrySkippedTagView, 0, len(r.Skipped))}
	if v.Published == nil {
		v.Published = []string{}
	}
	for _, s := range r.Skipped {
		v.Skipped = append(v.Skipped, RegistrySkippedTagView{Tag: s.Tag, Reason: s.Reason})
	}
	return v
}

type syncRegistryInput struct {
	IdempotencyHeader
	IDPath
}

func (a *API) registryCodeHost() (*registry.CodeHost, error) {
	if a.deps.Services.RegistryCodeHost == nil {
		return nil, fault.ErrUnavailable
	}
	return a.deps.Services.RegistryCodeHost, nil
}

// registerRegistrySource registers the code-host side of the registry:
// binding a module to a repository and syncing its tags.
func (a *API) registerRegistrySource() {
	tags := []string{"Registry"}

	register(a, huma.Operation{
		OperationID: "put-registry-module-source", Method: http.MethodPut, Path: "/v1/registry/modules/{id}/source",
		Summary: "Bind a module to a repository, or unbind it", Tags: tags,
		Description: "Needs registry:write. The repository must be selected in the organization's connected code-host " +
			"installation; the directory is validated like a working directory; the tag prefix is at most 100 bytes. Tag " +
			"pushes accepted before the change keep the binding they were accepted under.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *putRegistrySourceInput) (*Mutated[ModuleView], error) {
		ch, err := a.registryCodeHost()
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		return mutation(ctx, a, in.IdempotencyKey, in.Body, http.StatusOK,
			func(ctx context.Context, tx *sqlx.Tx, p access.Principal) (ModuleView, error) {
				m, err := ch.SetSource(ctx, tx, p, in.ID, *in.Body.input())
				return a.moduleView(m), err
			})
	})

	register(a, huma.Operation{
		OperationID: "sync-registry-module", Method: http.MethodPost, Path: "/v1/registry/modules/{id}/actions/sync",
		Summary: "Publish the repository's matching tags the module lacks", Tags: tags,
		Description: "Needs registry:write. Lists every tag of the bound repository and, in one transaction, starts " +
			"publishing each tag matching the binding that the module has neither taken nor has the version of, exactly as a " +
			"tag push would. A module with no version and no matching tag becomes no_version_tags. 409 when the module is " +
			"not bound or its repository is no longer selected.",
	}, operationOptions{mutation: true, admit: admitOrganization}, func(ctx context.Context, in *syncRegistryInput) (*Mutated[RegistrySyncView], error) {
		ch, err := a.registryCodeHost()
		if err != nil {
			return nil, a.fail(ctx, err)
		}
		return heldMutation(ctx, a, in.IdempotencyKey, struct{}{}, http.StatusOK,
			func(ctx context.Context, p access.Principal, settle func(context.Context, *sqlx.Tx, RegistrySyncView) error) error {
				_, err := ch.Sync(ctx, p, in.ID, func(ctx context.Context, tx *sqlx.Tx, res registry.SyncResult) error {
					return settle(ctx, tx, registrySyncView(res))
				})
				return err
			})
	})
}

// moduleSource resolves the optional source of POST /v1/registry/modules
// (a RegistrySourceRequest) in the creating transaction; absent or null is
// no binding.
func (a *API) moduleSource(ctx context.Context, tx *sqlx.Tx, p access.Principal, raw json.RawMessage) (*registry.Source, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var req RegistrySourceRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.RepositoryID == nil {
		return nil, fmt.Errorf("%w: source must be {repository_id, directory?, tag_prefix?}", fault.ErrValidation)
	}
	ch, err := a.registryCodeHost()
	if err != nil {
		return nil, err
	}
	return ch.ResolveSource(ctx, tx, p, req.input())
}
