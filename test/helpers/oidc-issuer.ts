import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

/** A person the issuer knows: any password signs them in (the provider's development login form). */
export interface IssuerUser {
  readonly email: string;
  readonly name: string;
  readonly groups: readonly string[];
}

export interface OidcIssuer {
  /** The issuer URL (`http://127.0.0.1:<port>`), known before the client is registered. */
  readonly url: string;
  /** Registers the relying party (its redirect URI is known once the gateway listens) and starts answering. */
  register(client: { clientId: string; clientSecret: string; redirectUri: string }): void;
  close(): Promise<void>;
}

/**
 * A real OpenID provider (`oidc-provider`, the certified Node implementation) on 127.0.0.1: discovery,
 * JWKS, the authorization code flow with PKCE, signed ID tokens, userinfo with a `groups` claim, and its
 * development login and consent pages (any login name of `users`, any password).
 */
export async function startOidcIssuer(users: Readonly<Record<string, IssuerUser>>): Promise<OidcIssuer> {
  let listener: RequestListener | undefined;
  const server: Server = createServer((req, res) => {
    if (listener) return listener(req, res);
    res.writeHead(503).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    register({ clientId, clientSecret, redirectUri }) {
      const provider = new Provider(url, {
        clients: [
          {
            client_id: clientId,
            client_secret: clientSecret,
            redirect_uris: [redirectUri],
            grant_types: ['authorization_code'],
            response_types: ['code'],
          },
        ],
        scopes: ['openid', 'email', 'profile', 'groups'],
        claims: { openid: ['sub'], email: ['email'], profile: ['name'], groups: ['groups'] },
        cookies: { keys: ['issuer-cookie-key-for-tests-0123456789'] },
        findAccount: async (_ctx, id) => {
          const user = users[id];
          if (!user) return undefined;
          return {
            accountId: id,
            claims: async () => ({ sub: id, email: user.email, name: user.name, groups: [...user.groups] }),
          };
        },
      });
      listener = provider.callback();
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
