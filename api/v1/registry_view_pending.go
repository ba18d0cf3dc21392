package v1

import (
	"time"

	"github.com/cairnhq/cairn/api/registry"
)

// ModuleView stands in for core's view until its /v1 registry file lands
// (the merge replaces this file).
type ModuleView struct {
	ID     string `json:"id"`
	Object string `json:"object" enum:"registry_module"`
	Status string `json:"status"`
	Source *struct {
		RepositoryID int64  `json:"repository_id"`
		Owner        string `json:"owner"`
		Repository   string `json:"repository"`
		Directory    string `json:"directory"`
		TagPrefix    string `json:"tag_prefix"`
	} `json:"source"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (a *API) moduleView(m registry.Module) ModuleView {
	v := ModuleView{ID: m.ID, Object: "registry_module", Status: m.Status, UpdatedAt: m.UpdatedAt}
	if s := m.Source; s != nil {
		v.Source = &struct {
			RepositoryID int64  `json:"repository_id"`
			Owner        string `json:"owner"`
			Repository   string `json:"repository"`
			Directory    string `json:"directory"`
			TagPrefix    string `json:"tag_prefix"`
		}{s.RepositoryID, s.Owner, s.Repository, s.Directory, s.TagPrefix}
	}
	return v
}
