// Package discovery is the one list of the protocols Cairn announces to
// Terraform-compatible CLIs: the /.well-known/terraform.json document the
// API serves, and the same services the worker writes into a sandbox's CLI
// configuration so that its commands need not ask for them.
package discovery
