package httpx

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
)

// refusingServer answers every POST whose declared body is over 64 KiB
// with 413 before reading any of it, as the API's body limits do.
func refusingServer(t *testing.T) string {
	t.Helper()
	app := fiber.New(fiber.Config{StreamRequestBody: true, BodyLimit: 1, DisableStartupMessage: true,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	app.Use(RequestContext(slog.New(slog.NewTextHandler(io.Discard, nil)), RequestOptions{}))
	app.Post("/", func(c *fiber.Ctx) error {
		if c.Request().Header.ContentLength() > 64<<10 {
			return WriteError(c, Problem{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge})
		}
		return c.SendStatus(http.StatusNoContent)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	return "http://" + ln.Addr().String()
}

// TestRefusedBodyIsAnsweredNotReset: a client that writes its whole too
// large body (within the drain allowance) before reading gets the 413
// every time, never a connection reset. Without the drain most runs of
// this test see "broken pipe" or "connection reset by peer".
func TestRefusedBodyIsAnsweredNotReset(t *testing.T) {
	t.Parallel()
	url := refusingServer(t)
	body := bytes.Repeat([]byte("d"), 1_000_000)
	for i := range 40 {
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("X-Request-Id") == "" || !resp.Close {
			t.Fatalf("request %d: %d, request ID %q, close %v", i, resp.StatusCode, resp.Header.Get("X-Request-Id"), resp.Close)
		}
	}
}
