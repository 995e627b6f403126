// Command demoenv runs a command with the demo's offline environment around it: a real
// registry (Debian's docker-registry) on a free port of 127.0.0.1 holding the demo's extra
// image, and a copy of the demo blueprint that names that registry. So `make demo` needs no
// network, and several demos can run at once.
//
//	demoenv --blueprint blueprints/demo.yaml -- snofactory build blueprints/demo.yaml ...
//
// Every argument of the command equal to --blueprint is replaced by the copy. Nothing
// demoenv starts outlives it, even if it is killed with SIGKILL: the command and the
// registry get the parent-death signal, and the registry's directory (which holds the copy)
// is removed by the next registry start.
package main
