// Package access defines who may do what: the permissions, the roles that
// grant them, and the Principal an authenticated request acts as. It has no
// I/O, so every domain can check permissions without depending on how a
// principal was authenticated.
package access
