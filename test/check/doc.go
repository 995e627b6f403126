// Package check holds the small assertions that table-driven tests across the module share,
// so an expected error reads, and fails, the same way everywhere.
package check
