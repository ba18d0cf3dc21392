package server

import (
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/platform/telemetry"
)

// The Fiber ends of the telemetry package: it imports no HTTP framework
// (the worker links it), so the API reads a request's route template,
// method and final status here and hands over only those.

// traceRequests traces every request as an http_request span named by its
// route template, method and status code.
func traceRequests(t *telemetry.Tracing, app *fiber.App) fiber.Handler {
	var once sync.Once
	var routes []string
	return func(c *fiber.Ctx) error {
		if !t.Recording() {
			return c.Next()
		}
		// The route table is complete once the first request arrives.
		once.Do(func() {
			for _, r := range app.GetRoutes(true) {
				routes = append(routes, r.Path)
			}
		})
		ctx, span := t.StartRequest(c.UserContext(), c.Get("traceparent"))
		c.SetUserContext(ctx)
		err := c.Next()
		span.EndRequest(routeTemplate(c), routes, c.Method(), finalStatus(c, err))
		return err
	}
}

// countRequests counts every request and its latency under its route
// template.
func countRequests(m *telemetry.Metrics) fiber.Handler {
	return func(c *fiber.Ctx) error {
		start := time.Now()
		err := c.Next()
		m.ObserveRequest(routeTemplate(c), c.Method(), finalStatus(c, err), time.Since(start))
		return err
	}
}

// routeTemplate is the matched route's template, or "unmatched" when only
// middleware (or nothing) matched.
func routeTemplate(c *fiber.Ctx) string {
	if r := c.Route(); r != nil && r.Path != "" && r.Path != "/" && r.Method != "USE" {
		return r.Path
	}
	return "unmatched"
}

// finalStatus is the status the error handler will answer with: a Fiber
// error's code, 500 for any other error, else what was written.
func finalStatus(c *fiber.Ctx, err error) int {
	if fe, ok := err.(*fiber.Error); ok {
		return fe.Code
	}
	if err != nil {
		return fiber.StatusInternalServerError
	}
	return c.Response().StatusCode()
}
