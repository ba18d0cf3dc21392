// Package server assembles cairn-api: one Fiber application carrying the
// public health and readiness endpoints, the native /v1 API and, as they
// land, the identity server and the remote-backend API. It decides
// framework-wide settings once — streamed request bodies so every limit is
// checked before bytes are read, timeouts, and the error handler.
package server
