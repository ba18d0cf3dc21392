package operator

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/launch"
	"github.com/cairnhq/cairn/api/platform/config"
	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx"
	"github.com/cairnhq/cairn/api/platform/idempotency"
	"github.com/cairnhq/cairn/api/problem"
)

// Actor is how operator-API changes name their author in evidence.
const Actor = "operator-api"

const bodyLimit = 65536

// Deps is what the operator API needs. Launch is nil without a database;
// an unset token leaves the whole API answering 503.
type Deps struct {
	Token  config.Secret
	Launch *launch.Service
	Logger *slog.Logger
}

type server struct{ Deps }

// Mount registers the operator-only routes (mounted at /operator/v1).
func Mount(router fiber.Router, deps Deps) {
	s := &server{Deps: deps}
	router.Use(s.authenticate)
	router.Get("/launch-control", s.getControl)
	router.Put("/launch-control", s.putControl)
	router.Get("/suspensions", s.suspensions)
	router.Post("/suspensions", s.changeSuspension((*launch.Service).Suspend))
	router.Post("/suspensions/actions/lift", s.changeSuspension((*launch.Service).Lift))
}

// authenticate admits only the configured operator token, compared in
// constant time; without one configured (or without a database) the API
// is closed.
func (s *server) authenticate(c *fiber.Ctx) error {
	if len(s.Token) < config.MinSecretBytes || s.Launch == nil {
		return httpx.WriteError(c, httpx.Problem{Status: http.StatusServiceUnavailable, Code: httpx.CodeUnavailable})
	}
	presented, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(presented), []byte(s.Token.Reveal())) != 1 {
		return httpx.WriteError(c, httpx.Problem{Status: http.StatusUnauthorized, Code: httpx.CodeUnauthenticated})
	}
	return c.Next()
}

func (s *server) fail(c *fiber.Ctx, err error) error {
	return httpx.WriteError(c, problem.Of(c.UserContext(), s.Logger, err))
}

func (s *server) ok(c *fiber.Ctx, data any) error {
	return c.JSON(httpx.Envelope[any]{Data: data, Meta: httpx.Meta{RequestID: httpx.RequestID(c)}})
}

// ControlView is a control version as the operator API shows it.
type ControlView struct {
	Object   string         `json:"object"`
	Version  int            `json:"version"`
	Document launch.Control `json:"document"`
}

func (s *server) getControl(c *fiber.Ctx) error {
	current, err := s.Launch.Current(c.UserContext())
	if err != nil {
		return s.fail(c, err)
	}
	if current == nil {
		return s.fail(c, fault.ErrNotFound)
	}
	return s.ok(c, ControlView{Object: "launch_control", Version: current.Version, Document: *current})
}

func (s *server) putControl(c *fiber.Ctx) error {
	var in struct {
		ExpectedVersion int             `json:"expected_version"`
		Reason          string          `json:"reason"`
		Document        json.RawMessage `json:"document"`
	}
	if err := httpx.DecodeJSON(c, bodyLimit, &in); err != nil {
		return s.fail(c, err)
	}
	doc, err := launch.Parse(in.Document)
	if err != nil {
		return s.fail(c, err)
	}
	control, replayed, err := s.Launch.Apply(c.UserContext(), launch.Change{
		Actor: Actor, RequestID: httpx.RequestID(c), IdempotencyKey: c.Get(idempotency.Header),
		ExpectedVersion: in.ExpectedVersion, Reason: in.Reason, Document: doc,
	})
	if err != nil {
		return s.fail(c, err)
	}
	if replayed {
		c.Set("Idempotent-Replayed", "true")
	}
	return s.ok(c, ControlView{Object: "launch_control", Version: control.Version, Document: control})
}

// suspensions reads one subject's suspension state and history, with the
// operator's reasons.
func (s *server) suspensions(c *fiber.Ctx) error {
	orgID, wsID := c.Query("organization_id"), c.Query("workspace_id")
	if orgID == "" || len(orgID) > 64 || len(wsID) > 64 {
		return s.fail(c, fmt.Errorf("%w: organization_id is required", fault.ErrValidation))
	}
	state, err := s.Launch.Suspensions(c.UserContext(), orgID, wsID)
	if err != nil {
		return s.fail(c, err)
	}
	return s.ok(c, state)
}

// changeSuspension suspends or lifts one subject: the body names it, the
// version the change replaces and the reason; Idempotency-Key makes a
// retry return the first answer.
func (s *server) changeSuspension(change func(*launch.Service, context.Context, launch.SuspensionChange) (launch.SuspensionRecord, bool, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var in struct {
			OrganizationID  string `json:"organization_id"`
			WorkspaceID     string `json:"workspace_id"`
			ExpectedVersion *int   `json:"expected_version"`
			Reason          string `json:"reason"`
		}
		if err := httpx.DecodeJSON(c, bodyLimit, &in); err != nil {
			return s.fail(c, err)
		}
		if in.ExpectedVersion == nil {
			return s.fail(c, fmt.Errorf("%w: expected_version is required (0 before the first change)", fault.ErrValidation))
		}
		rec, replayed, err := change(s.Launch, c.UserContext(), launch.SuspensionChange{
			Actor: Actor, RequestID: httpx.RequestID(c), IdempotencyKey: c.Get(idempotency.Header),
			OrganizationID: in.OrganizationID, WorkspaceID: in.WorkspaceID, ExpectedVersion: *in.ExpectedVersion, Reason: in.Reason,
		})
		if err != nil {
			return s.fail(c, err)
		}
		if replayed {
			c.Set("Idempotent-Replayed", "true")
		}
		return s.ok(c, rec)
	}
}
