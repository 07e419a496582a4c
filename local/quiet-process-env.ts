// Imported first by local/server.ts, before anything loads the `debug` package.

// simple-oauth2 logs its Basic authorization header (the client secret) through `debug`, and the
// deployed bundle swaps `debug` for lambda/silent-debug.ts. Locally the real package loads, and it
// reads DEBUG once when first required: cleared here, no namespace can print a secret.
delete process.env.DEBUG;
