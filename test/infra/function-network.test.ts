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

  it("lets the function out on 443 and the allowlist's ports only, IPv4 and IPv6, and lets nothing in", () => {
    inVpc.template.resourceCountIs('AWS::EC2::SecurityGroup', 1);
    const [group] = Object.values(inVpc.template.findResources('AWS::EC2::SecurityGroup')) as { Properties: Record<string, unknown> }[];
    const rules = (group?.Properties.SecurityGroupEgress as Record<string, unknown>[]).map(
      ({ IpProtocol, FromPort, ToPort, CidrIp, CidrIpv6 }) => `${IpProtocol} ${FromPort}-${ToPort} ${CidrIp ?? CidrIpv6}`,
    );

    expect(group?.Properties.VpcId).toBe(VPC);
    expect(rules).toEqual(['tcp 443-443 0.0.0.0/0', 'tcp 443-443 ::/0', 'tcp 8443-8443 0.0.0.0/0', 'tcp 8443-8443 ::/0']);
    expect(group?.Properties.SecurityGroupIngress).toBeUndefined();
    inVpc.template.resourceCountIs('AWS::EC2::SecurityGroupIngress', 0);
  });

  it('opens 443 alone with any public https URL allowed', () => {
    const { template } = synthesize({ allowAnyPublicTokenUrl: true, vpcId: VPC, vpcSubnetIds: SUBNETS });

    template.hasResourceProperties('AWS::EC2::SecurityGroup', {
      SecurityGroupEgress: [
        Match.objectLike({ FromPort: 443, CidrIp: '0.0.0.0/0' }),
        Match.objectLike({ FromPort: 443, CidrIpv6: '::/0' }),
      ],
    });
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

    const stack = buildApp(newApp({ bundle: false, context }));

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
