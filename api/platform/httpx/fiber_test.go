package httpx

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
)

// countingListener counts the bytes the server reads from its connections.
type countingListener struct {
	net.Listener
	read *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, read: l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// refusingServer answers every POST whose declared body is over 64 KiB
// with 413 before reading any of it, as the API's body limits do.
func refusingServer(t *testing.T) (string, *atomic.Int64) {
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
	read := &atomic.Int64{}
	go func() { _ = app.Listener(countingListener{Listener: ln, read: read}) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	return "http://" + ln.Addr().String(), read
}

// TestRefusedBodyIsAnsweredNotReset: a client that writes its whole too
// large body (within the drain allowance) before reading gets the 413
// every time, never a connection reset. Without the drain most runs of
// this test see "broken pipe" or "connection reset by peer".
func TestRefusedBodyIsAnsweredNotReset(t *testing.T) {
	t.Parallel()
	url, _ := refusingServer(t)
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

// TestLargeDeclaredBodyIsNotRead: beyond the drain allowance the server
// reads nothing of a refused body and closes the connection.
func TestLargeDeclaredBodyIsNotRead(t *testing.T) {
	t.Parallel()
	url, read := refusingServer(t)
	const size = 64 << 20
	req, _ := http.NewRequest(http.MethodPost, url, io.LimitReader(zeros{}, size))
	req.ContentLength = size
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	// Give the kernel a moment to hand over whatever the server would read.
	time.Sleep(100 * time.Millisecond)
	if n := read.Load(); n > 1<<20 {
		t.Fatalf("the server read %d bytes of a refused %d-byte body", n, size)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
