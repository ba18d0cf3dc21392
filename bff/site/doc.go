// Package site is the dashboard served by cairn-bff: server-rendered pages
// from web/templates that talk to the API only through its public contract
// (the apiclient for rendering, the control-plane proxy for the browser),
// the form actions behind them, and the live run channel. Every page group
// asks the API's launch-access probes first and renders a refusal or a
// failed call as "unavailable", never as an empty page.
package site
