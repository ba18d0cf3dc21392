// Package operator is the operator-only API under /operator/v1: reading and
// changing launch control and suspending or restoring tenants. It is
// authenticated by CAIRN_OPERATOR_TOKEN alone and closed when that is unset.
// Every change carries an expected version or an idempotency key and leaves
// evidence, exactly as the `cairn-api launch` command does.
package operator
