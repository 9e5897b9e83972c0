// A real OpenID provider for apigate's OAuth tests: oidc-provider (the certified Node OpenID
// Connect server), configured with three confidential clients (one per signing algorithm),
// Dynamic Client Registration (as MCP clients use), resource indicators (RFC 8707: access
// tokens are JWTs for the resource asked for), PKCE, and its development login and consent forms
// (any user name, any password), and introspection and revocation for the opaque tokens of
// apigate-op. Started by tests/it/signin.rs:
//
//   PORT=4100 RESOURCE=http://127.0.0.1:PORT/mcp KEYS_OUT=keys.json node provider.mjs
//
// PORT=0 (or none) listens on a port the system picks, so that no other process can take it
// between a test's choice and the listen; the issuer (with the port) is in KEYS_OUT and in the
// line `oidc-provider listening at ISSUER`. KEYS_OUT is written before that line: the issuer,
// its private signing keys (DER, so a test can sign tokens the provider would never issue:
// expired, for another audience) and one key it does not publish.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';

import Provider, { errors } from 'oidc-provider';

const server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', resolve);
});
const { port } = server.address();
const resource = process.env.RESOURCE;
// A second protected resource: a token for it must not open apigate.
const other = process.env.OTHER_RESOURCE ?? 'http://127.0.0.1:9/other-api';
const issuer = `http://127.0.0.1:${port}`;
const redirect = 'http://127.0.0.1:9/callback';

function key(type, options, alg) {
  const { privateKey } = generateKeyPairSync(type, options);
  const kid = `${alg.toLowerCase()}-${randomUUID().slice(0, 8)}`;
  return {
    kid,
    alg,
    jwk: { ...privateKey.export({ format: 'jwk' }), kid, alg, use: 'sig' },
    // DER, base64: PKCS#1 for RSA, PKCS#8 for the others (what jsonwebtoken's from_*_der read).
    der: privateKey.export({ format: 'der', type: type === 'rsa' ? 'pkcs1' : 'pkcs8' }).toString('base64'),
  };
}

const rsa = key('rsa', { modulusLength: 2048 }, 'RS256');
const ec = key('ec', { namedCurve: 'P-256' }, 'ES256');
const ed = key('ed25519', {}, 'EdDSA');
const unlisted = key('rsa', { modulusLength: 2048 }, 'RS256');
const pems = ({ kid, alg, der }) => ({ kid, alg, der });
writeFileSync(
  process.env.KEYS_OUT,
  JSON.stringify({ issuer, keys: [rsa, ec, ed].map(pems), unlisted: pems(unlisted) }),
);

// The client's id names the algorithm its access tokens are signed with; apigate-op gets opaque
// access tokens, which a resource server checks by introspection (RFC 7662).
const algs = { 'apigate-rs': 'RS256', 'apigate-es': 'ES256', 'apigate-ed': 'EdDSA' };
const clients = [...Object.keys(algs), 'apigate-op'];
const client = (client_id) => ({
  client_id,
  client_secret: `${client_id}-secret`,
  redirect_uris: [redirect],
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'client_secret_post',
});

const provider = new Provider(issuer, {
  clients: clients.map(client),
  jwks: { keys: [rsa.jwk, ec.jwk, ed.jwk] },
  // pets:admin: an operation's scope, for step-up (tests/it/step_up.rs).
  scopes: ['openid', 'offline_access', 'apigate:read', 'apigate:write', 'apigate:admin', 'pets:admin'],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, indicator, oidcClient) {
        if (indicator !== resource && indicator !== other) {
          throw new errors.InvalidTarget();
        }
        return {
          scope: 'apigate:read apigate:write apigate:admin pets:admin',
          audience: indicator,
          accessTokenTTL: 600,
          accessTokenFormat: oidcClient.clientId === 'apigate-op' ? 'opaque' : 'jwt',
          jwt: { sign: { alg: algs[oidcClient.clientId] ?? 'RS256' } },
        };
      },
    },
  },
  async findAccount(ctx, sub) {
    return { accountId: sub, claims: async () => ({ sub }) };
  },
  // What apigate maps to a tenant, an organization and roles.
  extraTokenClaims: () => ({ tenant: 'acme', org: 'acme-eng', roles: ['support'] }),
});
provider.proxy = false;
// Each request's method and path (never a query or body): a client check reads how far an
// MCP client got (metadata, registration, authorization).
provider.use(async (ctx, next) => {
  console.log(`request ${ctx.method} ${ctx.path}`);
  await next();
});
provider.on('server_error', (ctx, err) => console.error('server_error', err));

server.on('request', provider.callback());
console.log(`oidc-provider listening at ${issuer}`);
