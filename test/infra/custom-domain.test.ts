import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { buildApp } from '../../infra/app';
import { TokenExchangeStack, type TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import { newApp, projectContext, synthesize, withTokenUrlChoice } from './stack-fixture';

const CERTIFICATE = 'arn:aws:acm:eu-west-1:123456789012:certificate/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab';
const DOMAIN: TokenExchangeStackProps = { domainName: 'auth.example.com', certificateArn: CERTIFICATE };

let named: ReturnType<typeof synthesize>;
let zoned: ReturnType<typeof synthesize>;

beforeAll(() => {
  named = synthesize(DOMAIN);
  zoned = synthesize({ ...DOMAIN, hostedZoneId: 'Z0123456789ABCDEFGHIJ', disableExecuteApiEndpoint: true });
});

describe('a custom domain (domainName, certificateArn)', () => {
  it('creates a regional API domain with the certificate and TLS 1.2, mapped to the stage', () => {
    named.template.hasResourceProperties('AWS::ApiGatewayV2::DomainName', {
      DomainName: 'auth.example.com',
      DomainNameConfigurations: [{ CertificateArn: CERTIFICATE, EndpointType: 'REGIONAL', SecurityPolicy: 'TLS_1_2' }],
    });
    named.template.hasResourceProperties('AWS::ApiGatewayV2::ApiMapping', {
      ApiId: { Ref: Match.stringLikeRegexp('^Api') },
      DomainName: { Ref: Match.stringLikeRegexp('^CustomDomainDomainName') },
      Stage: '$default',
    });
  });

  it('outputs the name to point DNS at, and its token endpoints under the custom name', () => {
    const outputs = named.template.toJSON().Outputs as Record<string, { Value: unknown }>;

    expect(outputs.DomainTarget?.Value).toEqual({ 'Fn::GetAtt': [expect.stringMatching(/^CustomDomainDomainName/), 'RegionalDomainName'] });
    expect(outputs.ApiUrl?.Value).toBe('https://auth.example.com/');
    expect(outputs.TokenEndpointV1?.Value).toBe('https://auth.example.com/v1/oauth/token');
    expect(named.stack.apiUrl).toBe('https://auth.example.com/');
  });

  it('writes no DNS record without a hosted zone, and keeps the execute-api address', () => {
    named.template.resourceCountIs('AWS::Route53::RecordSet', 0);
    named.template.hasResourceProperties('AWS::ApiGatewayV2::Api', { DisableExecuteApiEndpoint: false });
  });

  it('writes a latency-routed alias record for its region into the hosted zone given', () => {
    zoned.template.hasResourceProperties('AWS::Route53::RecordSet', {
      HostedZoneId: 'Z0123456789ABCDEFGHIJ',
      Name: 'auth.example.com.',
      Type: 'A',
      Region: { Ref: 'AWS::Region' },
      SetIdentifier: { Ref: 'AWS::Region' },
      AliasTarget: {
        DNSName: { 'Fn::GetAtt': [Match.stringLikeRegexp('^CustomDomain'), 'RegionalDomainName'] },
        HostedZoneId: { 'Fn::GetAtt': [Match.stringLikeRegexp('^CustomDomain'), 'RegionalHostedZoneId'] },
      },
    });
  });

  it('turns the execute-api address off with disableExecuteApiEndpoint', () => {
    zoned.template.hasResourceProperties('AWS::ApiGatewayV2::Api', { DisableExecuteApiEndpoint: true });
  });

  it('passes the AwsSolutions checks', () => {
    expect(new AwsSolutionsChecks().validateScope(zoned.stack).violations).toEqual([]);
  });

  it('is read from context, as `-c domainName=... -c certificateArn=... -c hostedZoneId=... -c disableExecuteApiEndpoint=true` give it', () => {
    const context = {
      allowAnyPublicTokenUrl: 'true',
      domainName: 'Auth.Example.com',
      certificateArn: CERTIFICATE,
      hostedZoneId: 'Z0123456789ABCDEFGHIJ',
      disableExecuteApiEndpoint: 'true',
    };

    const template = Template.fromStack(buildApp(newApp({ bundle: false, context }))[0]);

    template.hasResourceProperties('AWS::ApiGatewayV2::DomainName', { DomainName: 'auth.example.com' });
    template.hasResourceProperties('AWS::ApiGatewayV2::Api', { DisableExecuteApiEndpoint: true });
    template.resourceCountIs('AWS::Route53::RecordSet', 1);
  });
});

describe('custom domain settings validation', () => {
  it.each<[string, TokenExchangeStackProps, RegExp]>([
    ['a certificate without a name', { certificateArn: CERTIFICATE }, /certificateArn needs domainName, the name it is for/],
    ['a hosted zone without a name', { hostedZoneId: 'Z0123456789ABCDEFGHIJ' }, /hostedZoneId needs domainName/],
    [
      'no execute-api address and no name',
      { disableExecuteApiEndpoint: true },
      /disableExecuteApiEndpoint=true needs domainName: without one the API would have no address/,
    ],
    ['a name without a certificate', { domainName: 'auth.example.com' }, /domainName needs certificateArn: an ACM certificate/],
    [
      'a name that is no DNS name',
      { ...DOMAIN, domainName: 'auth_example' },
      /domainName must be a lower-case DNS name .* got "auth_example"/,
    ],
    [
      'a certificate of another kind',
      { ...DOMAIN, certificateArn: 'arn:aws:iam::123456789012:server-certificate/x' },
      /certificateArn must be an ACM certificate ARN/,
    ],
    [
      'a hosted zone id of another form',
      { ...DOMAIN, hostedZoneId: 'example.com' },
      /hostedZoneId must be a Route 53 hosted zone id .* got "example.com"/,
    ],
  ])('refuses %s', (_case, props, message) => {
    expect(() => synthesize(props)).toThrow(message);
  });

  it("refuses a certificate from another region than a pinned stack's: a regional API needs its own region's", () => {
    const app = new App({ context: { ...projectContext(), 'aws:cdk:bundling-stacks': [] } });

    const act = () =>
      new TokenExchangeStack(app, 'Pinned', withTokenUrlChoice({ ...DOMAIN, env: { account: '123456789012', region: 'us-east-1' } }));

    expect(act).toThrow(
      /certificateArn is in eu-west-1, but the stack deploys to us-east-1, and it can only use what is in its own region/,
    );
  });
});
