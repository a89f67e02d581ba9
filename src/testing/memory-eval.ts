/**
 * The memory-search evaluation set: a generated history of a long conversation (a person and
 * an agent, 240 turns) with facts said once along the way and buried in everyday chatter, a memory file with a
 * few more, and questions asking for each fact in other words. Deterministic (a seeded
 * generator), so a figure measured today is the figure of tomorrow. recall@5: the share of
 * questions whose fact is among the first five hits.
 */

export interface EvalFact {
  /** What the person said (in a turn) or what the memory file holds (a paragraph). */
  said: string;
  /** The question asked much later, in other words. */
  question: string;
  /** Where it is: a turn of the conversation, or the memory file. */
  in: 'thread' | 'memory';
}

export const FACTS: EvalFact[] = [
  { in: 'thread', said: 'My sister Clara moved to Lisbon last spring for her job at the aquarium.', question: 'In which city does my sister live now?' },
  { in: 'thread', said: 'Our first dog was a beagle called Pepper, she lived to fourteen.', question: 'What was the name of our first dog?' },
  { in: 'thread', said: 'I am allergic to penicillin, it gave me a rash as a kid.', question: 'Which antibiotic must I avoid?' },
  { in: 'thread', said: 'The wifi password at the cabin is bluefjord42.', question: 'What is the password of the cabin wifi?' },
  { in: 'thread', said: 'My daughter Mia plays the cello in the school orchestra.', question: 'Which instrument does Mia play?' },
  { in: 'thread', said: 'The car insurance renews on the 3rd of March with Allianz.', question: 'When does the car insurance renew?' },
  { in: 'thread', said: 'My favourite restaurant is Taberna do Mar near the harbour.', question: 'What is my favourite restaurant called?' },
  { in: 'thread', said: 'I keep the spare house key under the blue flower pot.', question: 'Where is the spare key hidden?' },
  { in: 'thread', said: 'My dentist is Dr. Okafor on Elm Street, appointments on Tuesdays.', question: 'Who is my dentist?' },
  { in: 'thread', said: 'The boiler was serviced in October by a company called Heatwise.', question: 'Which company serviced the boiler?' },
  { in: 'thread', said: 'My grandmother was born in Kraków in 1931.', question: 'Where was grandma born?' },
  { in: 'thread', said: 'We painted the living room sage green in the summer.', question: 'What colour is the living room?' },
  { in: 'thread', said: 'My passport number ends in 4471 and expires in 2029.', question: 'When does my passport expire?' },
  { in: 'thread', said: 'Tom from accounting prefers tea with oat milk, never coffee.', question: 'How does Tom take his drinks?' },
  { in: 'thread', said: 'The garden shed lock combination is 8-3-1-9.', question: 'What opens the shed lock?' },
  { in: 'thread', said: 'I ran the Berlin marathon in 2019 in four hours and ten minutes.', question: 'What was my marathon time in Berlin?' },
  { in: 'thread', said: 'My brother Jonas is a carpenter and lives in Freiburg.', question: 'What does Jonas do for a living?' },
  { in: 'thread', said: 'Our anniversary is on the 14th of September, we married in 2011.', question: 'When is our wedding anniversary?' },
  { in: 'thread', said: 'The plumber who fixed the leak was Ravi, his number is in my contacts as Ravi Pipes.', question: 'Who fixed the leak last time?' },
  { in: 'thread', said: 'I take levothyroxine every morning before breakfast.', question: 'Which medication do I take in the mornings?' },
  { in: 'thread', said: 'Our cat Miso only eats the salmon flavoured food.', question: 'What food does Miso eat?' },
  { in: 'thread', said: "My book club meets on the last Thursday of the month at Anna's flat.", question: 'Where does the book club meet?' },
  { in: 'thread', said: 'The router admin page is at 192.168.1.1 and the user is admin.', question: 'Where is the router admin page?' },
  { in: 'thread', said: 'My shoe size is 43 in European sizes.', question: 'What size shoes do I wear?' },
  { in: 'thread', said: "The kids' school starts at 8:15 and the bus leaves at 7:50.", question: 'When does the school bus leave?' },
  { in: 'thread', said: 'I learned to sail on Lake Constance with my uncle Bernd.', question: 'Where did I learn sailing?' },
  { in: 'thread', said: 'My blood type is A negative.', question: 'What is my blood type?' },
  { in: 'thread', said: 'We bought the sofa at a shop called Lindqvist Interiors, it has a ten year warranty.', question: 'Where did we buy the sofa?' },
  { in: 'thread', said: 'My employee number at work is K-20931.', question: 'What is my employee number?' },
  { in: 'thread', said: "The neighbours' son Leo waters our plants when we travel.", question: 'Who waters the plants while we are away?' },
  { in: 'memory', said: 'Prefers answers in short bullet points, no long paragraphs.', question: 'How do I like my answers formatted?' },
  { in: 'memory', said: 'Works as a structural engineer at a bridge design firm in Hamburg.', question: 'What is my job?' },
  { in: 'memory', said: 'Vegetarian since 2015; eats fish occasionally.', question: 'Do I eat meat?' },
  { in: 'memory', said: 'Speaks German, Portuguese and some Japanese.', question: 'Which languages do I speak?' },
  { in: 'memory', said: 'Has a standing weekly call with parents on Sunday evenings.', question: 'When do I call my parents?' },
];

/** Everyday chatter the facts are buried in: the same kind of words, no answers. */
const CHATTER = [
  'Can you check the weather for tomorrow morning?',
  'Remind me to call the bank about the card.',
  'What is a good recipe for a quick dinner tonight?',
  'I need to buy milk, bread and eggs later.',
  'How long does it take to drive to the airport?',
  'Please summarise the article I sent about electric cars.',
  'My sister called, we talked about the holidays.',
  'The dog needs a walk before it rains.',
  'Can you find a time for the meeting with Tom next week?',
  'What do you think about the new phone models?',
  'I am tired today, the kids were up early.',
  'Let us plan the garden work for the weekend.',
  'How many days until the school holidays start?',
  'The car makes a strange noise when I brake.',
  'Any ideas for a birthday present for my brother?',
  'I watched a documentary about the ocean yesterday.',
  'Please add dentist to my calendar for some time in May.',
  'What is the capital of Portugal again?',
  'I should renew my gym membership soon.',
  'The cat knocked over the plant in the living room.',
];

const REPLIES = ['Done.', 'Sure, here is what I found.', 'Got it, I will keep that in mind.', 'Noted.', 'Here is a short summary.', 'I have added it.'];

/** A small seeded generator (mulberry32), so the history is the same on every run. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface EvalHistory {
  /** The person's messages and the agent's replies, oldest first (turns = pairs). */
  turns: { person: string; agent: string }[];
  /** Index into `turns` where each thread fact was said. */
  factTurn: Map<EvalFact, number>;
  /** The memory file (Markdown), holding the memory facts. */
  memoryFile: string;
}

/** A conversation of `turns` turns with every thread fact said once, at a seeded place. */
export function evalHistory(turns = 240, seed = 7): EvalHistory {
  const next = random(seed);
  const threadFacts = FACTS.filter((fact) => fact.in === 'thread');
  const places = new Set<number>();
  while (places.size < threadFacts.length) places.add(Math.floor(next() * turns));
  const sorted = [...places].sort((a, b) => a - b);
  const factTurn = new Map<EvalFact, number>();
  const history: EvalHistory['turns'] = [];
  for (let turn = 0; turn < turns; turn++) {
    const index = sorted.indexOf(turn);
    const fact = index >= 0 ? threadFacts[index] : undefined;
    if (fact) factTurn.set(fact, turn);
    history.push({ person: fact?.said ?? CHATTER[Math.floor(next() * CHATTER.length)]!, agent: REPLIES[Math.floor(next() * REPLIES.length)]! });
  }
  const memoryFacts = FACTS.filter((fact) => fact.in === 'memory');
  const memoryFile = `# What I know about this person\n\n## Work and habits\n\n${memoryFacts.map((fact) => fact.said).join('\n\n')}\n`;
  return { turns: history, factTurn, memoryFile };
}
