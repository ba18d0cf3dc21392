// Package seal encrypts what Cairn must keep but never show: sensitive
// variable values and other secrets at rest. Each value gets its own data
// key wrapped by CAIRN_MASTER_KEY, and is bound to its record through
// associated data. Without a master key nothing is sealed or opened.
package seal
