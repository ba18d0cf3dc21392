// Package workspace is projects, workspaces and workspace variables. A
// workspace's display name is unique per organization and renamable; its
// slug and remote-backend cloud name are derived once and never change; its
// execution settings are immutable numbered versions. Sensitive variable
// values are sealed at rest and never read back through any operation.
package workspace
