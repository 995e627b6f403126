// Package layout holds the tests that keep the project's structure: the engine imports no
// stage, no stage imports another, and the CLI carries no OpenShift knowledge.
package layout
