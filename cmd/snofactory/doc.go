// Command snofactory builds relocatable single-node OpenShift seed images from blueprints.
//
// This package is the CLI only: flags, output formats and exit codes. The work happens in
// blueprints/, pipeline/, stages/ and seeds/.
package main
