import { Annotations, Match, type Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { buildApp } from '../../infra/app';
import type { TokenExchangeStackProps } from '../../infra/token-exchange-stack';
import { newApp, synthesize } from './stack-fixture';

const VPC = 'vpc-0123456789abcdef0';
const SUBNETS = ['subnet-0123456789abcdef0', 'subnet-0123456789abcdef1'];
const IN_A_VPC: TokenExchangeStackProps = {
  allowedTokenUrls: ['https://login.example.com', 'https://10.0.0.5:8443/oauth2/'],
  vpcId: VPC,
  vpcSubnetIds: SUBNETS,
};

let inVpc: ReturnType<typeof synthesize>;

beforeAll(() => {
  inVpc = synthesize(IN_A_VPC);
});

/** The security group's egress rules as `protocol from-to cidr`. */
function egress(template: Template): string[] {
  const [group] = Object.values(template.findResources('AWS::EC2::SecurityGroup')) as {
    Properties: { SecurityGroupEgress: Record<string, unknown>[] };
  }[];
  return (group?.Properties.SecurityGroupEgress ?? []).map(
    ({ IpProtocol, FromPort, ToPort, CidrIp, CidrIpv6 }) => `${IpProtocol} ${FromPort}-${ToPort} ${CidrIp ?? CidrIpv6}`,
  );
}

const rolePolicy = (template: Template, name: string): unknown => {
  const [role] = Object.values(template.findResources('AWS::IAM::Role')) as {
    Properties: { Policies: { PolicyName: string; PolicyDocument: unknown }[] };
  }[];
  return role?.Properties.Policies.find((policy) => policy.PolicyName === name)?.PolicyDocument;
};

describe('the function in a VPC (vpcId, vpcSubnetIds)', () => {
  it('runs in the given subnets behind a security group of its own', () => {
    inVpc.template.hasResourceProperties('AWS::Lambda::Function', {
      VpcConfig: { SubnetIds: SUBNETS, SecurityGroupIds: [{ 'Fn::GetAtt': [Match.stringLikeRegexp('^NetworkSecurityGroup'), 'GroupId'] }] },
    });
  });

  it("lets the function out only to the allowlist: a name's port anywhere (IPv4 and IPv6), an address literal's port to that address alone, and lets nothing in", () => {
    inVpc.template.resourceCountIs('AWS::EC2::SecurityGroup', 1);
    const [group] = Object.values(inVpc.template.findResources('AWS::EC2::SecurityGroup')) as { Properties: Record<string, unknown> }[];

    expect(group?.Properties.VpcId).toBe(VPC);
    expect(egress(inVpc.template)).toEqual(['tcp 443-443 0.0.0.0/0', 'tcp 443-443 ::/0', 'tcp 8443-8443 10.0.0.5/32']);
    expect(group?.Properties.SecurityGroupIngress).toBeUndefined();
    inVpc.template.resourceCountIs('AWS::EC2::SecurityGroupIngress', 0);
  });

  it('opens no 443 when no allowlist entry uses it and the function calls no AWS service', () => {
    const { template } = synthesize({ ...IN_A_VPC, allowedTokenUrls: ['https://10.0.0.5:8443/oauth2/', 'https://[fd00::5]:9443'] });

    expect(egress(template)).toEqual(['tcp 8443-8443 10.0.0.5/32', 'tcp 9443-9443 fd00::5/128']);
  });

  it.each<[string, TokenExchangeStackProps]>([
    ['the shared cache (DynamoDB and Secrets Manager)', { tokenCache: 'shared' }],
    [
      'stored credentials (Secrets Manager and KMS)',
      {
        callerAuthorization: 'iam',
        storedCredentials: [
          {
            name: 'orders-api',
            clientId: 'orders',
            tokenUrl: 'https://10.0.0.5:8443/oauth2/token',
            method: 'client_secret_post',
            secretName: 'orders',
            callers: ['arn:aws:iam::123456789012:role/orders'],
          },
        ],
      },
    ],
  ])('opens 443 anywhere for the AWS endpoints of %s', (_case, props) => {
    const { template } = synthesize({ ...IN_A_VPC, allowedTokenUrls: ['https://10.0.0.5:8443/oauth2/'], ...props });

    expect(egress(template)).toEqual(['tcp 443-443 0.0.0.0/0', 'tcp 443-443 ::/0', 'tcp 8443-8443 10.0.0.5/32']);
  });

  it('uses the security groups given instead, and creates none', () => {
    const { template } = synthesize({ ...IN_A_VPC, vpcSecurityGroupIds: ['sg-0123456789abcdef0'] });

    template.resourceCountIs('AWS::EC2::SecurityGroup', 0);
    template.hasResourceProperties('AWS::Lambda::Function', {
      VpcConfig: { SubnetIds: SUBNETS, SecurityGroupIds: ['sg-0123456789abcdef0'] },
    });
  });

  it('lets the role manage network interfaces only in that VPC, and describe them (which only works on *)', () => {
    expect(rolePolicy(inVpc.template, 'UseVpcNetworkInterfaces')).toEqual({
      Version: '2012-10-17',
      Statement: [
        { Effect: 'Allow', Action: ['ec2:DescribeNetworkInterfaces', 'ec2:DescribeSubnets'], Resource: '*' },
        {
          Effect: 'Allow',
          Action: [
            'ec2:AssignPrivateIpAddresses',
            'ec2:CreateNetworkInterface',
            'ec2:DeleteNetworkInterface',
            'ec2:UnassignPrivateIpAddresses',
          ],
          Resource: '*',
          Condition: {
            ArnEquals: {
              'ec2:Vpc': {
                'Fn::Join': [
                  '',
                  ['arn:', { Ref: 'AWS::Partition' }, ':ec2:', { Ref: 'AWS::Region' }, ':', { Ref: 'AWS::AccountId' }, `:vpc/${VPC}`],
                ],
              },
            },
          },
        },
      ],
    });
  });

  it('says so in the role description', () => {
    inVpc.template.hasResourceProperties('AWS::IAM::Role', {
      Description: 'Token exchange function: writes its own logs, manages its network interfaces in its VPC',
    });
  });

  it('gives the role nothing of EC2 outside a VPC', () => {
    expect(rolePolicy(synthesize().template, 'UseVpcNetworkInterfaces')).toBeUndefined();
  });

  it('passes the AwsSolutions checks, the grant on * acknowledged with its reason', () => {
    expect(new AwsSolutionsChecks().validateScope(inVpc.stack).violations).toEqual([]);
  });

  it('is read from context, as `-c vpcId=... -c vpcSubnetIds=a,b -c vpcSecurityGroupIds=sg` give it', () => {
    const context = {
      allowAnyPublicTokenUrl: 'true',
      vpcId: VPC,
      vpcSubnetIds: SUBNETS.join(','),
      vpcSecurityGroupIds: 'sg-0123456789abcdef0',
    };

    const [stack] = buildApp(newApp({ bundle: false, context }));

    expect(stack.network?.subnetIds).toEqual(SUBNETS);
    expect(stack.network?.securityGroupIds).toEqual(['sg-0123456789abcdef0']);
  });
});

describe('an allowlist entry only a network of yours can reach', () => {
  const warnings = (props: TokenExchangeStackProps) =>
    Annotations.fromStack(synthesize(props).stack).findWarning(
      '*',
      Match.stringLikeRegexp('names an address only a network of your own reaches'),
    );

  it.each(['https://10.0.0.5', 'https://[fd00::5]:8443', 'http://localhost:8080'])('warns at synth without a VPC: %s', (entry) => {
    expect(warnings({ allowedTokenUrls: [entry] })).toHaveLength(1);
  });

  it('warns of nothing in a VPC, nor for a public host', () => {
    expect(warnings(IN_A_VPC)).toEqual([]);
    expect(warnings({ allowedTokenUrls: ['https://login.example.com', 'https://*.auth0.com'] })).toEqual([]);
  });
});

describe('network settings validation', () => {
  it.each<[string, TokenExchangeStackProps, RegExp]>([
    ['subnets without a VPC', { vpcSubnetIds: SUBNETS }, /vpcSubnetIds needs vpcId, the VPC they belong to/],
    ['security groups without a VPC', { vpcSecurityGroupIds: ['sg-0123456789abcdef0'] }, /vpcSecurityGroupIds needs vpcId/],
    ['a VPC without subnets', { vpcId: VPC }, /vpcId needs vpcSubnetIds: the subnets the function runs in/],
    ['a VPC with an empty subnet list', { vpcId: VPC, vpcSubnetIds: [] }, /vpcId needs vpcSubnetIds/],
    [
      'a VPC id of another form',
      { vpcId: 'vpc-12', vpcSubnetIds: SUBNETS },
      /vpcId must be a VPC id like vpc-0123456789abcdef0, got "vpc-12"/,
    ],
    [
      'a subnet id of another form',
      { vpcId: VPC, vpcSubnetIds: ['subnet-x'] },
      /vpcSubnetIds entries must be subnet ids .* got "subnet-x"/,
    ],
    [
      'a security group id of another form',
      { vpcId: VPC, vpcSubnetIds: SUBNETS, vpcSecurityGroupIds: ['default'] },
      /vpcSecurityGroupIds entries must be security group ids .* got "default"/,
    ],
    [
      'an empty security group list',
      { vpcId: VPC, vpcSubnetIds: SUBNETS, vpcSecurityGroupIds: [] },
      /vpcSecurityGroupIds must list at least one group/,
    ],
  ])('refuses %s', (_case, props, message) => {
    expect(() => synthesize(props)).toThrow(message);
  });
});
