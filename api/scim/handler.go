package scim

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"

	elimity "github.com/elimity-com/scim"
	scimerrors "github.com/elimity-com/scim/errors"
	"github.com/elimity-com/scim/optional"
	"github.com/elimity-com/scim/schema"
	"github.com/scim2/filter-parser/v2"

	"github.com/cairnhq/cairn/api/identity"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/reqid"
	"github.com/cairnhq/cairn/api/team"
)

// MaxCount is the most resources one list answers (and its default
// count), as HCP Terraform caps its SCIM lists.
const MaxCount = 100

// MaxBodyBytes bounds a SCIM request body (RFC 7644's maxPayloadSize
// that the library advertises); a larger one is 413.
const MaxBodyBytes = 1 << 20

// allowStringValues switches the library's process-global acceptance of
// "True"/"False" for booleans (Entra ID sends active as a string); it is
// set once, here, for the one SCIM surface of the process.
var allowStringValues sync.Once

type organizationKey struct{}

// WithOrganization binds a request context to the organization its SCIM
// token resolved to; the handler serves nothing without one.
func WithOrganization(ctx context.Context, organizationID string) context.Context {
	return context.WithValue(ctx, organizationKey{}, organizationID)
}

func organizationOf(r *http.Request) (string, error) {
	id, _ := r.Context().Value(organizationKey{}).(string)
	if id == "" {
		return "", errors.New("scim: request without an authenticated organization")
	}
	return id, nil
}

// Handler is the SCIM protocol surface (paths under /v2) for the
// organization WithOrganization put in each request's context.
func (s *Service) Handler() (http.Handler, error) {
	allowStringValues.Do(func() { schema.SetAllowStringValues(true) })
	config := &elimity.ServiceProviderConfig{
		AuthenticationSchemes: []elimity.AuthenticationScheme{{
			Type: elimity.AuthenticationTypeOauthBearerToken, Name: "SCIM token",
			Description: "The organization's SCIM token, from POST /api/auth/scim/generate-token, as a bearer token.",
			Primary:     true,
		}},
		MaxResults:       MaxCount,
		SupportFiltering: true,
		SupportPatch:     true,
	}
	server, err := elimity.NewServer(&elimity.ServerArgs{
		ServiceProviderConfig: config,
		ResourceTypes: []elimity.ResourceType{
			{
				ID: optional.NewString("User"), Name: "User", Endpoint: "/Users",
				Description: optional.NewString("A person this organization provisioned"),
				Schema:      schema.CoreUserSchema(),
				SchemaExtensions: []elimity.SchemaExtension{
					{Schema: schema.ExtensionEnterpriseUser()},
				},
				Handler: userHandler{s},
			},
			{
				ID: optional.NewString("Group"), Name: "Group", Endpoint: "/Groups",
				Description: optional.NewString("A team of the organization"),
				Schema:      schema.CoreGroupSchema(),
				Handler:     groupHandler{s},
			},
		},
	}, elimity.WithBaseURL(s.opts.BaseURL))
	if err != nil {
		return nil, err
	}
	return server, nil
}

// ErrorBody is an error in SCIM's error schema, for answers the protocol
// handler does not give (authentication, body limits).
func ErrorBody(status int, detail string) []byte {
	raw, _ := scimerrors.ScimError{Status: status, Detail: detail}.MarshalJSON()
	return raw
}

// protocolError maps the service's errors into SCIM's error schema: the
// one place that does. Anything unexpected is logged and answered as a
// bare 500, never with its text.
func (s *Service) protocolError(r *http.Request, id string, err error) error {
	var scimErr scimerrors.ScimError
	switch {
	case errors.As(err, &scimErr):
		return scimErr
	case errors.Is(err, fault.ErrNotFound), errors.Is(err, team.ErrOwnersTeam), errors.Is(err, team.ErrNotOwner):
		// The owners team is never SCIM's: it is as missing as any other
		// organization's resource.
		return scimerrors.ScimErrorResourceNotFound(id)
	case errors.Is(err, ErrUniqueness), errors.Is(err, team.ErrNameTaken):
		e := scimerrors.ScimErrorUniqueness
		e.Detail = err.Error()
		return e
	case errors.Is(err, identity.ErrLastOwner):
		return scimerrors.ScimError{Status: http.StatusConflict, Detail: err.Error()}
	case errors.Is(err, ErrUnsupportedFilter):
		e := scimerrors.ScimErrorInvalidFilter
		e.Detail = err.Error()
		return e
	case errors.Is(err, ErrNoTarget):
		e := scimerrors.ScimErrorNoTarget
		e.Detail = err.Error()
		return e
	case errors.Is(err, fault.ErrValidation):
		e := scimerrors.ScimErrorInvalidValue
		e.Detail = err.Error()
		return e
	}
	s.logger.ErrorContext(r.Context(), "scim request failed", "request_id", reqid.From(r.Context()),
		"method", r.Method, "path", r.URL.Path, "error", err)
	return scimerrors.ScimErrorInternal
}

type userHandler struct{ s *Service }

func userResource(u User) elimity.Resource {
	attrs := elimity.ResourceAttributes(u.resource())
	delete(attrs, "externalId")
	res := elimity.Resource{ID: u.ID, Attributes: attrs,
		Meta: elimity.Meta{Created: &u.CreatedAt, LastModified: &u.UpdatedAt}}
	if u.ExternalID != nil {
		res.ExternalID = optional.NewString(*u.ExternalID)
	}
	return res
}

func (h userHandler) Create(r *http.Request, attrs elimity.ResourceAttributes) (elimity.Resource, error) {
	org, err := organizationOf(r)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, "", err)
	}
	u, err := h.s.CreateUser(r.Context(), org, attrs)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, "", err)
	}
	return userResource(u), nil
}

func (h userHandler) Get(r *http.Request, id string) (elimity.Resource, error) {
	org, err := organizationOf(r)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, id, err)
	}
	u, err := h.s.GetUser(r.Context(), org, id)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, id, err)
	}
	return userResource(u), nil
}

func (h userHandler) GetAll(r *http.Request, params elimity.ListRequestParams) (elimity.Page, error) {
	org, err := organizationOf(r)
	if err != nil {
		return elimity.Page{}, h.s.protocolError(r, "", err)
	}
	users, total, err := h.s.ListUsers(r.Context(), org, filterOf(params), params.StartIndex, params.Count)
	if err != nil {
		return elimity.Page{}, h.s.protocolError(r, "", err)
	}
	page := elimity.Page{TotalResults: total, Resources: make([]elimity.Resource, 0, len(users))}
	for _, u := range users {
		page.Resources = append(page.Resources, userResource(u))
	}
	return page, nil
}

func (h userHandler) Replace(r *http.Request, id string, attrs elimity.ResourceAttributes) (elimity.Resource, error) {
	org, err := organizationOf(r)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, id, err)
	}
	u, err := h.s.ReplaceUser(r.Context(), org, id, attrs)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, id, err)
	}
	return userResource(u), nil
}

func (h userHandler) Patch(r *http.Request, id string, ops []elimity.PatchOperation) (elimity.Resource, error) {
	org, err := organizationOf(r)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, id, err)
	}
	u, err := h.s.PatchUser(r.Context(), org, id, ops)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, id, err)
	}
	return userResource(u), nil
}

func (h userHandler) Delete(r *http.Request, id string) error {
	org, err := organizationOf(r)
	if err != nil {
		return h.s.protocolError(r, id, err)
	}
	if err := h.s.DeleteUser(r.Context(), org, id); err != nil {
		return h.s.protocolError(r, id, err)
	}
	return nil
}

type groupHandler struct{ s *Service }

func groupResource(g Group, members bool) elimity.Resource {
	attrs := elimity.ResourceAttributes(g.resource())
	delete(attrs, "externalId")
	if !members {
		delete(attrs, "members")
	}
	res := elimity.Resource{ID: g.ID, Attributes: attrs}
	if g.ExternalID != nil {
		res.ExternalID = optional.NewString(*g.ExternalID)
	}
	return res
}

func (h groupHandler) Create(r *http.Request, attrs elimity.ResourceAttributes) (elimity.Resource, error) {
	org, err := organizationOf(r)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, "", err)
	}
	g, err := h.s.CreateGroup(r.Context(), org, attrs)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, "", err)
	}
	return groupResource(g, true), nil
}

func (h groupHandler) Get(r *http.Request, id string) (elimity.Resource, error) {
	org, err := organizationOf(r)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, id, err)
	}
	g, err := h.s.GetGroup(r.Context(), org, id)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, id, err)
	}
	return groupResource(g, true), nil
}

// GetAll lists teams; excludedAttributes=members (Entra ID asks for it on
// every lookup) skips reading the members at all.
func (h groupHandler) GetAll(r *http.Request, params elimity.ListRequestParams) (elimity.Page, error) {
	org, err := organizationOf(r)
	if err != nil {
		return elimity.Page{}, h.s.protocolError(r, "", err)
	}
	members := true
	for _, excluded := range strings.Split(r.URL.Query().Get("excludedAttributes"), ",") {
		if strings.EqualFold(strings.TrimSpace(excluded), "members") {
			members = false
		}
	}
	groups, total, err := h.s.ListGroups(r.Context(), org, filterOf(params), params.StartIndex, params.Count, members)
	if err != nil {
		return elimity.Page{}, h.s.protocolError(r, "", err)
	}
	page := elimity.Page{TotalResults: total, Resources: make([]elimity.Resource, 0, len(groups))}
	for _, g := range groups {
		page.Resources = append(page.Resources, groupResource(g, members))
	}
	return page, nil
}

func (h groupHandler) Replace(r *http.Request, id string, attrs elimity.ResourceAttributes) (elimity.Resource, error) {
	org, err := organizationOf(r)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, id, err)
	}
	g, err := h.s.ReplaceGroup(r.Context(), org, id, attrs)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, id, err)
	}
	return groupResource(g, true), nil
}

func (h groupHandler) Patch(r *http.Request, id string, ops []elimity.PatchOperation) (elimity.Resource, error) {
	org, err := organizationOf(r)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, id, err)
	}
	g, err := h.s.PatchGroup(r.Context(), org, id, ops)
	if err != nil {
		return elimity.Resource{}, h.s.protocolError(r, id, err)
	}
	return groupResource(g, true), nil
}

func (h groupHandler) Delete(r *http.Request, id string) error {
	org, err := organizationOf(r)
	if err != nil {
		return h.s.protocolError(r, id, err)
	}
	if err := h.s.DeleteGroup(r.Context(), org, id); err != nil {
		return h.s.protocolError(r, id, err)
	}
	return nil
}

func filterOf(params elimity.ListRequestParams) filter.Expression {
	if params.FilterValidator == nil {
		return nil
	}
	return params.FilterValidator.GetFilter()
}
