// Command payloadgen pushes a synthetic OpenShift release payload (see
// test/payload) into a registry, for the demo and benchmarks.
//
//	payloadgen --registry 127.0.0.1:5000 --components 60 --size small --seed 1 \
//	    --iso build/conformance/conformance.iso
//
// With --serve it starts its own throwaway registry (test/registry), pushes
// the payload there, prints where it is and keeps the registry up until
// interrupted.
package main
