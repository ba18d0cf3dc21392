// Package server mounts cairn-api's HTTP surfaces on one Fiber application:
// the public health and readiness endpoints, metrics, the identity server,
// the native /v1 API, the remote-backend API and the module registry
// protocol, over the domain services api/assembly built. It decides
// framework-wide settings once — streamed request bodies so every limit is
// checked before bytes are read, timeouts, and the error handler — and is
// the only place the telemetry package meets Fiber.
package server
