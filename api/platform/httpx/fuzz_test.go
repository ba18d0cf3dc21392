package httpx

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/cairnhq/cairn/api/platform/fault"
	"github.com/cairnhq/cairn/api/platform/httpx/httpxtest"
	"github.com/cairnhq/cairn/api/platform/jsondoc/jsondoctest"
)

// fuzzDoc has the shapes request documents use: strings, optional
// numbers, lists and a nested object.
type fuzzDoc struct {
	Name   string            `json:"name"`
	Count  *int              `json:"count"`
	Tags   []string          `json:"tags"`
	Labels map[string]string `json:"labels"`
	Nested *struct {
		On bool `json:"on"`
	} `json:"nested"`
}

// FuzzDecodeJSON sends bodies through DecodeJSON on a Fiber app that
// streams request bodies as api/server's does, with a declared length or
// chunked, under a small limit. A body over the limit is refused as too
// large whichever way it came; one within it is either refused as a
// validation failure or is exactly one JSON document, decoded as
// encoding/json decodes it, with no text PostgreSQL could not store.
func FuzzDecodeJSON(f *testing.F) {
	app := fiber.New(fiber.Config{StreamRequestBody: true, BodyLimit: 1, DisableStartupMessage: true})
	app.Post("/:limit", func(c *fiber.Ctx) error {
		limit, _ := strconv.ParseInt(c.Params("limit"), 10, 64)
		var v fuzzDoc
		err := DecodeJSON(c, limit, &v)
		switch {
		case err == nil:
			return c.JSON(v)
		case errors.Is(err, ErrTooLarge):
			return c.SendStatus(http.StatusRequestEntityTooLarge)
		case errors.Is(err, fault.ErrValidation):
			return c.SendStatus(http.StatusBadRequest)
		}
		return c.Status(http.StatusInternalServerError).SendString(err.Error())
	})
	for _, s := range []string{
		`{"name":"prod","count":3,"tags":["a","b"],"labels":{"k":"v"},"nested":{"on":true}}`,
		`{"name":"x"} `, `{"name":"x"}}`, `{"name":"x"}]`, `{"name":"x"}{}`, `{"name":"a\u0000b"}`,
		`{"name":"\\u0000"}`, `{"Name":"case"}`, `{"unknown":1}`, `{"name":"\ud800"}`, "{\"name\":\"\xff\"}", `[]`, ``,
	} {
		f.Add([]byte(s), false, uint16(64))
		f.Add([]byte(s), true, uint16(len(s)))
	}
	f.Fuzz(func(t *testing.T, body []byte, chunked bool, limit uint16) {
		l := int64(limit % 1024)
		resp, err := httpxtest.Do(app, httpxtest.Request{
			Method: http.MethodPost, Target: "/" + strconv.FormatInt(l, 10), Body: body,
			Header:  [][2]string{{"Content-Type", "application/json"}},
			Chunked: chunked, Split: int(limit) % (len(body) + 1),
		})
		if err != nil {
			t.Fatal(err)
		}
		over := int64(len(body)) > l
		switch {
		case over:
			if resp.Status != http.StatusRequestEntityTooLarge {
				t.Fatalf("%d-byte body over a %d-byte limit answered %d %s", len(body), l, resp.Status, resp.Body)
			}
		case resp.Status == http.StatusRequestEntityTooLarge:
			t.Fatalf("%d-byte body within a %d-byte limit refused as too large", len(body), l)
		case resp.Status == http.StatusOK:
			requireOneDocument(t, body, resp.Body)
		case resp.Status != http.StatusBadRequest:
			t.Fatalf("body %q: %d %s", body, resp.Status, resp.Body)
		}
	})
}

// requireOneDocument checks an accepted body against encoding/json alone.
func requireOneDocument(t *testing.T, body, decoded []byte) {
	t.Helper()
	if !json.Valid(body) {
		t.Fatalf("accepted %q, which is not one JSON document", body)
	}
	var want, got fuzzDoc
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("accepted %q, which encoding/json refuses: %v", body, err)
	}
	if err := json.Unmarshal(decoded, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q decoded as %+v, encoding/json reads %+v", body, got, want)
	}
	if err := jsondoctest.Storable(got); err != nil {
		t.Fatal(err)
	}
}
