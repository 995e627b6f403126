// Package registries turns a stage's registry settings (mirrors, insecure registries,
// registries.conf, signature policy, pull secret) into a containers/image SystemContext,
// and checks images against the signature policy (Policy) before their content is used.
// Every stage that talks to registries (resolve, precache) shares it, so they reach
// registries, and refuse images, the same way.
package registries
