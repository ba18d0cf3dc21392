// Package httpxtest sends raw HTTP/1.1 requests to a Fiber app in memory,
// for fuzz targets that need to choose the exact bytes on the wire: a
// declared length or chunked framing, split where they like, with no
// socket per request.
package httpxtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/gofiber/fiber/v2"
)

// Request is one request as it goes on the wire. Header lines come in
// order; Host, Connection: close and the body's framing are added.
type Request struct {
	Method string
	Target string
	Header [][2]string
	Body   []byte
	// Chunked sends the body with chunked transfer encoding, in two chunks
	// split at Split (clamped to the body), instead of a Content-Length.
	Chunked bool
	Split   int
}

// Bytes is the request's wire form.
func (r Request) Bytes() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: cairn.test\r\nConnection: close\r\n", r.Method, r.Target)
	for _, h := range r.Header {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	if !r.Chunked {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(r.Body))
		b.Write(r.Body)
		return b.Bytes()
	}
	b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	split := min(max(r.Split, 0), len(r.Body))
	for _, chunk := range [][]byte{r.Body[:split], r.Body[split:]} {
		if len(chunk) > 0 {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(chunk), chunk)
		}
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

// Response is what the app answered.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do serves req on app over an in-memory connection and returns the
// answer. The request is written while the answer is read, so an app that
// answers without reading the body does not stall.
func Do(app *fiber.App, req Request) (Response, error) {
	app.Handler() // builds the route tree, as app.Test and Listen do
	client, server := net.Pipe()
	defer client.Close()
	served := make(chan error, 1)
	go func() {
		err := app.Server().ServeConn(server)
		// A server that gives up on the connection must hang up, or the
		// read below would wait forever.
		server.Close()
		served <- err
	}()
	go func() {
		_, _ = client.Write(req.Bytes())
	}()
	resp, err := http.ReadResponse(bufio.NewReader(client), nil)
	if err != nil {
		return Response{}, fmt.Errorf("reading response: %w (server: %v)", err, <-served)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("reading response body: %w", err)
	}
	client.Close()
	<-served
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}
