const pkg = require('../../package.json') as { version: string };

/** Version string of the running service (package.json). */
export const SERVICE_VERSION: string = pkg.version;
