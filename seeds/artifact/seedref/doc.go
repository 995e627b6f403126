// Package seedref opens the seed a reference names, whatever the reference is: a seed
// directory on this machine, an OCI layout (oci:DIR[:TAG]), an OCI archive
// (oci-archive:FILE[:TAG]) or a registry reference (docker:// optional). It is the one
// place that tells these apart, decides where a pulled seed is staged, and applies the
// trust policy before a seed's content is used, so that every command reading a seed
// treats it the same way. Problems with the reference itself (malformed, missing, refused
// by the policy) are *badinput.Error: the caller's input, not a failure.
package seedref
