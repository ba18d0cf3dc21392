// Package scim is SCIM 2.0 provisioning (RFC 7643, RFC 7644) for one
// organization at a time: its identity provider's client, holding the
// organization's SCIM token, creates, changes, deactivates and deletes the
// people it provisioned, and manages the organization's teams as SCIM
// groups (the owners team excepted). It never reaches a person it did not
// provision. The protocol surface is github.com/elimity-com/scim's handler;
// this package supplies its resource handlers, keeps the SCIM attributes,
// translates filters to SQL and maps its errors into SCIM's error schema.
package scim
