// Placeholder until the embedded IdP lands: starts nothing.
export default async function globalSetup(): Promise<void> {}
